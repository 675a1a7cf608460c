"""Benchmark of the knowledge service: `python bench/knowledge.py [--specs 5000] [--rounds 300]`.

Measures per-call time of get_node_types, get_node_details (1 and 10 nodes) and search_nodes
through the real service functions (registry freshness check included), on the built-in
catalog and on a synthetic catalog grown to `--specs` specs, in a throwaway SQLite database.

Needs: the project's venv only (the start command's is enough); about 40 s with the defaults.

The peer, measured in the same run, is the reference design of seeds/000: serialise the spec
on every call and score a search by substring matches over every spec. Ratios are
ours / peer: below 1 means faster than the reference.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

QUERIES = [
    "send an email",
    "notify my team on slack when a form is submitted",
    "remember earlier conversation turns",
    "call a rest api",
    "run every morning at 9",
    "ask a manager to approve a refund",
    "scrape a website into markdown",
    "store embeddings for semantic search",
]

VOCABULARY = """account alert analytics archive attachment audit backup balance batch billing
board booking budget calendar campaign card cart catalog channel chart chat checkout client
comment commit contact contract crm customer dashboard deal delivery deploy document domain
draft email employee event expense export feed file folder form forecast group inbox invoice
issue job label lead ledger list log meeting message metric note notification order page
payment payroll pipeline playlist post price product profile project purchase queue quote
record release report repository request review schedule shipment signup sms snapshot
spreadsheet subscription survey task team ticket timesheet transaction upload user video
webhook workflow""".split()
SERVICES = """Airtable Asana Box Dropbox Freshdesk Gitlab HubSpot Intercom Jira Linear Mailchimp
Monday Pipedrive QuickBooks Salesforce SendGrid Shopify Stripe Twilio Typeform Webflow Xero
Zendesk Zoom""".split()
VERBS = "create update delete list fetch sync send archive export import tag assign close".split()


def synthetic_documents(
    base: list[dict[str, Any]], count: int, seed: int = 7
) -> list[dict[str, Any]]:
    """Specs shaped like the built-in ones, with made-up services and actions."""
    rng = random.Random(seed)
    documents = []
    for number in range(count):
        template = base[number % len(base)]
        service = rng.choice(SERVICES)
        verb, noun = rng.choice(VERBS), rng.choice(VOCABULARY)
        words = " ".join(rng.choices(VOCABULARY, k=25))
        documents.append(
            {
                **template,
                "node_type": "EXTERNAL_ACTION" if number % 3 else "TOOL",
                "subtype": f"{service.upper()}_{verb.upper()}_{noun.upper()}_{number}",
                "display_name": f"{service} {verb} {noun}",
                "description": f"{verb.capitalize()} a {noun} in {service}. {words}.",
                "aliases": [],
                "tags": [service.lower(), noun, verb, rng.choice(VOCABULARY)],
            }
        )
    return documents


def reference_serialize(document: dict[str, Any]) -> dict[str, Any]:
    """The seed-000 peer: build the response from the stored spec on every call."""
    from nodespecs.knowledge.serialization import serialize_spec

    return serialize_spec(document)


def reference_search(documents: list[dict[str, Any]], query: str, limit: int = 10) -> list[Any]:
    """The seed-000 peer: +10 for the whole query in the description, +5/+3 in parameters."""
    needle = query.lower()
    matches = []
    for document in documents:
        score = 10 if needle in document["description"].lower() else 0
        for name, param in (document.get("configurations") or {}).items():
            score += 5 if needle in name.lower() else 0
            score += 3 if needle in param.get("description", "").lower() else 0
        if score:
            matches.append((score, document["subtype"]))
    matches.sort(reverse=True)
    return matches[:limit]


def per_call_us(function: Callable[[], Any], rounds: int) -> float:
    """Median time of one call, in microseconds."""
    function()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter_ns()
        function()
        samples.append((time.perf_counter_ns() - start) / 1000)
    return statistics.median(samples)


def measure(
    label: str, documents: list[dict[str, Any]], rounds: int
) -> list[tuple[str, str, float, float]]:
    from nodespecs.knowledge import service as knowledge

    one = [{"node_type": documents[0]["node_type"], "subtype": documents[0]["subtype"]}]
    ten = [
        {"node_type": d["node_type"], "subtype": d["subtype"]}
        for d in documents[:: len(documents) // 10][:10]
    ]
    by_key = {(d["node_type"], d["subtype"]): d for d in documents}
    query_cycle = iter(QUERIES * (rounds + 1))

    rows = [
        (
            "get_node_types",
            per_call_us(knowledge.get_node_types, rounds),
            per_call_us(lambda: sorted({d["node_type"] for d in documents}), rounds),
        ),
        (
            "get_node_details (1 node)",
            per_call_us(lambda: knowledge.get_node_details(one), rounds),
            per_call_us(
                lambda: [reference_serialize(by_key[(n["node_type"], n["subtype"])]) for n in one],
                rounds,
            ),
        ),
        (
            "get_node_details (10 nodes)",
            per_call_us(lambda: knowledge.get_node_details(ten), rounds),
            per_call_us(
                lambda: [reference_serialize(by_key[(n["node_type"], n["subtype"])]) for n in ten],
                rounds,
            ),
        ),
        (
            "search_nodes",
            per_call_us(lambda: knowledge.search_nodes(next(query_cycle)), rounds),
            per_call_us(lambda: reference_search(documents, next(query_cycle)), rounds),
        ),
    ]
    return [(label, name, ours, peer) for name, ours, peer in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--specs", type=int, default=5000, help="size of the synthetic catalog")
    parser.add_argument("--rounds", type=int, default=300, help="calls measured per figure")
    arguments = parser.parse_args()

    database = Path(tempfile.mkdtemp()) / "bench.sqlite3"
    os.environ["DATABASE_URL"] = f"sqlite:///{database}"
    os.environ.pop("REDIS_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from nodespecs.knowledge.catalog import load_builtin_catalog
    from nodespecs.knowledge.registry import catalog_changed, current_registry
    from nodespecs.models import DOCUMENT_FIELDS, NodeSpec

    call_command("migrate", verbosity=0)
    load_builtin_catalog()
    catalog_changed()
    builtin = list(NodeSpec.objects.values(*DOCUMENT_FIELDS))
    rows = measure(f"built-in ({len(builtin)} specs)", builtin, arguments.rounds)

    synthetic = synthetic_documents(builtin, arguments.specs - len(builtin))
    NodeSpec.objects.bulk_create(NodeSpec(**document) for document in synthetic)
    catalog_changed()
    start = time.perf_counter()
    current_registry()
    build_ms = (time.perf_counter() - start) * 1000
    everything = list(NodeSpec.objects.values(*DOCUMENT_FIELDS))
    rows += measure(f"synthetic ({len(everything)} specs)", everything, arguments.rounds)

    print(f"python {sys.version.split()[0]}, {arguments.rounds} calls per figure, median per call")
    print(f"{'catalog':<24} {'call':<28} {'ours µs':>10} {'peer µs':>10} {'ours/peer':>10}")
    for label, name, ours, peer in rows:
        print(f"{label:<24} {name:<28} {ours:>10.1f} {peer:>10.1f} {ours / peer:>10.3f}")
    print(f"registry rebuild after a change, {len(everything)} specs: {build_ms:.0f} ms")


if __name__ == "__main__":
    main()
