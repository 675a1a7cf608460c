"""The built-in catalog loader: idempotent, and it never silently overwrites an author's work."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from nodespecs.knowledge.catalog import document_digest, load_builtin_catalog, read_builtin_catalog
from nodespecs.knowledge.specformat import dump_spec_document
from nodespecs.knowledge.specs import spec_save
from nodespecs.models import NodeSpec, NodeSpecRevision


@pytest.fixture(scope="module")
def catalog() -> dict[str, dict]:
    """The catalog files' entries by TYPE/SUBTYPE, as the loader should store them."""
    return {
        f"{document.node_type}/{document.subtype}": dump_spec_document(document)
        for document in read_builtin_catalog()
    }


def run_command(*args: str) -> str:
    out = io.StringIO()
    call_command("load_node_specs", *args, stdout=out)
    return out.getvalue()


def summary_line(output: str) -> str:
    return next(line for line in output.splitlines() if line.startswith("Node specs:"))


@pytest.fixture
def slack() -> NodeSpec:
    return NodeSpec.objects.get(node_type="EXTERNAL_ACTION", subtype="SLACK")


def test_the_first_load_creates_every_spec_in_the_catalog_files(db, catalog):
    report = load_builtin_catalog()

    assert len(report.created) == len(catalog)
    assert set(report.created) == set(catalog)
    assert report.updated == report.unchanged == []
    assert report.skipped == {}
    assert NodeSpec.objects.count() == len(catalog)
    assert set(NodeSpec.objects.values_list("source", flat=True)) == {NodeSpec.Source.BUILTIN}


def test_each_loaded_spec_holds_its_catalog_entry_and_one_revision(db, catalog):
    load_builtin_catalog()

    spec = NodeSpec.objects.get(node_type="ACTION", subtype="HTTP_REQUEST")
    entry = catalog["ACTION/HTTP_REQUEST"]
    assert spec.document() == entry
    assert spec.builtin_digest == document_digest(entry)
    revision = spec.revisions.get()
    assert revision.number == 1
    assert revision.author is None
    assert revision.comment == "Loaded from the built-in catalog"
    assert NodeSpecRevision.objects.count() == NodeSpec.objects.count()


def test_a_second_load_changes_nothing(loaded_catalog, catalog):
    revisions_before = NodeSpecRevision.objects.count()

    report = load_builtin_catalog()

    assert set(report.unchanged) == set(catalog)
    assert report.created == report.updated == []
    assert report.skipped == {}
    assert NodeSpecRevision.objects.count() == revisions_before


def test_a_spec_an_author_edited_is_skipped_with_a_hint_about_force(
    loaded_catalog, slack, author, catalog
):
    slack.description = "Our team's own wording for the Slack node."
    spec_save(spec=slack, author=author, comment="Reworded")
    revisions_before = NodeSpecRevision.objects.count()

    report = load_builtin_catalog()

    assert list(report.skipped) == ["EXTERNAL_ACTION/SLACK"]
    assert "edited locally" in report.skipped["EXTERNAL_ACTION/SLACK"]
    assert "--force" in report.skipped["EXTERNAL_ACTION/SLACK"]
    assert len(report.unchanged) == len(catalog) - 1
    slack.refresh_from_db()
    assert slack.description == "Our team's own wording for the Slack node."
    assert NodeSpecRevision.objects.count() == revisions_before


def test_force_puts_an_edited_spec_back_to_the_catalog_text(loaded_catalog, slack, author, catalog):
    slack.description = "Our team's own wording for the Slack node."
    spec_save(spec=slack, author=author, comment="Reworded")

    report = load_builtin_catalog(force=True)

    assert report.updated == ["EXTERNAL_ACTION/SLACK"]
    assert report.skipped == {}
    slack.refresh_from_db()
    assert slack.description == catalog["EXTERNAL_ACTION/SLACK"]["description"]
    assert slack.source == NodeSpec.Source.BUILTIN
    # The author's edit is still in the history, below the forced reload.
    numbers_and_comments = list(slack.revisions.order_by("number").values_list("number", "comment"))
    assert numbers_and_comments == [
        (1, "Loaded from the built-in catalog"),
        (2, "Reworded"),
        (3, "Loaded from the built-in catalog"),
    ]
    assert slack.revisions.get(number=2).document["description"] == (
        "Our team's own wording for the Slack node."
    )
    # And once forced back, the next plain load has nothing to do.
    assert "EXTERNAL_ACTION/SLACK" in load_builtin_catalog().unchanged


def test_a_custom_spec_with_a_built_in_name_is_skipped_without_force(db, author, catalog):
    own = NodeSpec(
        node_type="ACTION",
        subtype="HTTP_REQUEST",
        description="Our own HTTP node, written before the catalog was loaded.",
    )
    spec_save(spec=own, author=author, comment="Created")

    report = load_builtin_catalog()

    assert "ACTION/HTTP_REQUEST" not in report.created
    assert "created by an author" in report.skipped["ACTION/HTTP_REQUEST"]
    assert "--force" in report.skipped["ACTION/HTTP_REQUEST"]
    own.refresh_from_db()
    assert own.source == NodeSpec.Source.CUSTOM
    assert own.description == "Our own HTTP node, written before the catalog was loaded."
    assert own.revisions.count() == 1
    assert len(report.created) == len(catalog) - 1


def test_force_replaces_a_custom_spec_with_the_built_in_one(db, author, catalog):
    own = NodeSpec(node_type="ACTION", subtype="HTTP_REQUEST", description="Our own HTTP node.")
    spec_save(spec=own, author=author, comment="Created")

    report = load_builtin_catalog(force=True)

    assert "ACTION/HTTP_REQUEST" in report.updated
    own.refresh_from_db()
    assert own.source == NodeSpec.Source.BUILTIN
    assert own.document() == catalog["ACTION/HTTP_REQUEST"]


def test_a_changed_catalog_entry_updates_a_spec_nobody_edited(loaded_catalog, slack, catalog):
    # Make the stored spec look as if it was loaded from an older catalog entry.
    older = slack.document() | {"version": "0.9.0", "description": "An older description."}
    NodeSpec.objects.filter(pk=slack.pk).update(
        version=older["version"],
        description=older["description"],
        builtin_digest=document_digest(older),
    )

    report = load_builtin_catalog()

    assert report.updated == ["EXTERNAL_ACTION/SLACK"]
    assert report.skipped == {}
    slack.refresh_from_db()
    assert slack.document() == catalog["EXTERNAL_ACTION/SLACK"]
    assert slack.revisions.order_by("-number").first().number == 2


def test_the_command_prints_the_counts(db, catalog):
    total = len(catalog)

    first = run_command()
    second = run_command()

    assert summary_line(first) == (
        f"Node specs: {total} created, 0 updated, 0 unchanged, 0 skipped."
    )
    assert summary_line(second) == (
        f"Node specs: 0 created, 0 updated, {total} unchanged, 0 skipped."
    )


def test_the_command_names_a_skipped_spec_and_how_to_overwrite_it(loaded_catalog, slack, catalog):
    slack.description = "Reworded locally."
    spec_save(spec=slack, comment="Reworded")
    total = len(catalog)

    output = run_command()

    assert "skipped EXTERNAL_ACTION/SLACK: edited locally; run with --force" in output
    assert summary_line(output) == (
        f"Node specs: 0 created, 0 updated, {total - 1} unchanged, 1 skipped."
    )
    slack.refresh_from_db()
    assert slack.description == "Reworded locally."


def test_the_command_with_force_overwrites_and_names_the_update(loaded_catalog, slack, catalog):
    slack.description = "Reworded locally."
    spec_save(spec=slack, comment="Reworded")
    total = len(catalog)

    output = run_command("--force")

    assert "updated: EXTERNAL_ACTION/SLACK" in output
    assert summary_line(output) == (
        f"Node specs: 0 created, 1 updated, {total - 1} unchanged, 0 skipped."
    )
    slack.refresh_from_db()
    assert slack.description == catalog["EXTERNAL_ACTION/SLACK"]["description"]


def test_the_command_lists_created_names_only_when_asked_for_detail(db):
    quiet = run_command()

    # More than ten names are summed up, not listed, unless verbosity is raised.
    assert "created:" not in quiet
    NodeSpec.objects.all().delete()
    out = io.StringIO()
    call_command("load_node_specs", verbosity=2, stdout=out)
    assert "ACTION/HTTP_REQUEST" in out.getvalue().split("created:", 1)[1]
