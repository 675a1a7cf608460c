"""Benchmark of the reviewer history pages at scale: `python bench/history_pages.py`.

    createdb -h 127.0.0.1 -U postgres switchyard_history
    export DATABASE_URL=postgresql://postgres@127.0.0.1:5432/switchyard_history
    .venv/bin/python manage.py migrate && .venv/bin/python manage.py seed_history --runs 1000000
    .venv/bin/python bench/history_pages.py [--requests 40] [--warmup 3] [--depth 0.9]

Server time of each page: a GET through Django's test client in this process, timed from
the call to the rendered response (middleware, session and user, the page's queries, the
template), without network or HTTP parsing; DEBUG=false. Pages:

- runs list, first page (`/runs/`);
- runs list filtered by workflow and status (`/runs/?workflow=poll_report&status=failed`),
  and by status alone;
- runs list, deep page: the cursor of the run at `--depth` of the history, newest first
  (0.9: row 900,000 of 1,000,000);
- run detail of a run with 200 node executions.

The peer, measured alternately in the same run, is the Django admin's read-only Run pages
(`graphs/admin/runs.py`) on the same rows: its changelist with the same status filter (it
cannot filter by workflow), the page at the same depth (`?p=`, OFFSET pagination, 100 a page), and
its change page of the same run (200 inline rows). Ratios are ours / admin in time (below 1:
we are faster). Each page's query count is reported from one request. Target (issue 5):
p95 under 200 ms for each of our pages.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# A production start: no query log kept by the debug cursor. The key only signs sessions.
os.environ.setdefault("DEBUG", "false")
os.environ.setdefault("SECRET_KEY", "bench-history-pages-" + os.urandom(16).hex())
# The test client speaks plain HTTP: no redirect to HTTPS.
os.environ.setdefault("SECURE_SSL_REDIRECT", "false")

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext, override_settings  # noqa: E402

from graphs.history.selectors import Cursor  # noqa: E402
from graphs.models import Run  # noqa: E402

# The admin's list of runs shows this many a page (Django's default).
ADMIN_PAGE_SIZE = 100


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def cases(depth: float) -> list[tuple[str, str, str]]:
    """(page, our URL, the admin's URL) for each page measured."""
    total = Run.objects.order_by().values("pk").count()
    # Counted from the oldest, where the index starts: one cheap OFFSET, once.
    position = round(total * (1 - depth))
    deep = Run.objects.order_by("created_at", "id").only("created_at")[position]
    detail = Run.objects.filter(node_count=200).order_by("-id").values_list("pk", flat=True).first()
    if detail is None:
        sys.exit("No run with 200 node executions: seed the database with seed_history first.")
    deep_page = (total - position) // ADMIN_PAGE_SIZE + 1
    print(
        f"{total:,} runs; deep cursor at row {total - position:,} (run {deep.pk}); "
        f"detail: run {detail}",
        flush=True,
    )
    return [
        ("runs, first page", "/runs/", "/admin/graphs/run/"),
        (
            "runs, workflow + status",
            "/runs/?workflow=poll_report&status=failed",
            "/admin/graphs/run/?status__exact=failed",
        ),
        ("runs, status", "/runs/?status=failed", "/admin/graphs/run/?status__exact=failed"),
        (
            f"runs, deep (row {total - position:,})",
            f"/runs/?before={Cursor.of(deep).token()}",
            f"/admin/graphs/run/?p={deep_page}",
        ),
        ("run detail, 200 nodes", f"/runs/{detail}/", f"/admin/graphs/run/{detail}/change/"),
    ]


def timed(client: Client, url: str) -> float:
    started = time.perf_counter()
    response = client.get(url)
    elapsed = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        sys.exit(f"GET {url} answered {response.status_code}")
    return elapsed


def queries(client: Client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        client.get(url)
    return len(captured)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=40, help="measured requests per page")
    parser.add_argument("--warmup", type=int, default=3, help="discarded requests per page")
    parser.add_argument("--depth", type=float, default=0.9, help="deep page: 0 newest, 1 oldest")
    args = parser.parse_args()
    if connection.vendor != "postgresql":
        print("Note: not PostgreSQL; the figures the issue asks for are on PostgreSQL.")
    user, _ = get_user_model().objects.get_or_create(
        username="bench-reviewer", defaults={"is_staff": True, "is_superuser": True}
    )
    client = Client()
    client.force_login(user)
    rows = []
    for page, ours, peer in cases(args.depth):
        times: dict[str, list[float]] = {"ours": [], "admin": []}
        for _ in range(args.warmup):
            timed(client, ours), timed(client, peer)
        for _ in range(args.requests):
            times["ours"].append(timed(client, ours))
            times["admin"].append(timed(client, peer))
        row = {
            "page": page,
            **{
                f"{who} {name}": percentile(values, fraction)
                for who, values in times.items()
                for name, fraction in (("p50", 0.5), ("p95", 0.95))
            },
            "ours queries": queries(client, ours),
            "admin queries": queries(client, peer),
        }
        row["ours/admin p50"] = row["ours p50"] / row["admin p50"]
        rows.append(row)
        print(
            f"{page}: ours p50 {row['ours p50']:.1f} ms p95 {row['ours p95']:.1f} ms "
            f"({row['ours queries']} queries); admin p50 {row['admin p50']:.1f} ms "
            f"p95 {row['admin p95']:.1f} ms ({row['admin queries']} queries)",
            flush=True,
        )
    print()
    print(
        "| page | ours p50 ms | ours p95 ms | ours queries | admin p50 ms | admin p95 ms "
        "| admin queries | ours/admin |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        print(
            f"| {row['page']} | {row['ours p50']:.1f} | {row['ours p95']:.1f} "
            f"| {row['ours queries']} | {row['admin p50']:.1f} | {row['admin p95']:.1f} "
            f"| {row['admin queries']} | {row['ours/admin p50']:.3f} |"
        )
    worst = max(row["ours p95"] for row in rows)
    verdict = "met" if worst < 200 else "NOT met"
    print(f"\nTarget p95 < 200 ms on each of our pages: {verdict} (worst {worst:.1f} ms).")


if __name__ == "__main__":
    # Assets are named by the plain storage: the bench renders pages, it serves no files,
    # so the production manifest (built by collectstatic) is not needed.
    with override_settings(
        STORAGES={
            "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
            "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
        },
        ALLOWED_HOSTS=["testserver"],
    ):
        main()
