"""A workflow group's slug: its MCP endpoint `/mcp/<slug>`, chosen once from its name."""

from __future__ import annotations

import pytest

from graphs.authoring.services import group_save
from graphs.authoring.slugs import MAX_SLUG_LENGTH, slug_for
from graphs.models import WorkflowGroup

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("count files", "count-files"),
        ("switchExample", "switchexample"),
        ("  Café -- Déjà vu!  ", "cafe-deja-vu"),
        ("日本", "server"),
        ("", "server"),
        ("a" * 500, "a" * (MAX_SLUG_LENGTH - 8)),
    ],
)
def test_a_slug_is_lower_case_letters_digits_and_dashes(name, slug):
    assert slug_for(name, lambda taken: False) == slug


def test_a_taken_slug_gets_the_first_free_suffix():
    taken = {"tools", "tools-2"}
    assert slug_for("Tools", taken.__contains__) == "tools-3"


def test_groups_whose_names_differ_get_different_slugs(db):
    first = group_save(WorkflowGroup(name="My Tools"))
    second = group_save(WorkflowGroup(name="my-tools"))
    assert (first.slug, second.slug) == ("my-tools", "my-tools-2")


def test_a_renamed_group_keeps_its_endpoint(db):
    group = group_save(WorkflowGroup(name="before"))
    group.name = "after"
    group_save(group)
    group.refresh_from_db()
    assert group.slug == "before"


def test_the_admin_shows_each_groups_endpoint(admin_client, db):
    group_save(WorkflowGroup(name="Shown Here"))
    page = admin_client.get("/admin/graphs/workflowgroup/").content.decode()
    assert "/mcp/shown-here" in page
