"""How a new group's slug is chosen: the taken slugs read in one query whatever the number of
groups sharing a base, and a slug taken by a concurrent save between that read and the
insert chosen again instead of failing the save."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection
from django.test.utils import CaptureQueriesContext

from graphs.authoring import services
from graphs.authoring.services import group_save
from graphs.authoring.slugs import slug_for
from graphs.models import WorkflowGroup

pytestmark = pytest.mark.timeout(30)

# Ten names that all reduce to the base "a-b".
SAME_BASE = ["a b", "a-b", "A B", "a_b", "A-B", "a  b", "a.b", "a/b", "A_b", "a--b"]


def test_the_queries_of_a_save_do_not_grow_with_the_groups_sharing_its_base(db):
    counts = []
    for name in SAME_BASE:
        with CaptureQueriesContext(connection) as queries:
            group_save(WorkflowGroup(name=name))
        counts.append(len(queries))
    # One read of the taken slugs, then the insert in its savepoint (SAVEPOINT, INSERT,
    # RELEASE): a query per candidate suffix cost the tenth save eleven.
    assert max(counts) <= 4
    assert counts[-1] == counts[1]
    slugs = list(WorkflowGroup.objects.order_by("pk").values_list("slug", flat=True))
    assert slugs == ["a-b"] + [f"a-b-{number}" for number in range(2, 11)]


def test_the_queries_of_a_save_are_bounded_whatever_the_number_of_groups(
    db, django_assert_max_num_queries
):
    for name in SAME_BASE:
        group_save(WorkflowGroup(name=name))
    with django_assert_max_num_queries(4):
        group = group_save(WorkflowGroup(name="A..B"))
    assert group.slug == "a-b-11"


def test_only_slugs_sharing_the_base_are_read(db):
    group_save(WorkflowGroup(name="tools"))
    group_save(WorkflowGroup(name="other"))
    assert services._taken_slugs(WorkflowGroup(name="Tools")) == {"tools"}


def _taken_by_another_after_each_read(monkeypatch, times):
    """Make a concurrent save take, just after each of the next `times` reads of the taken
    slugs, the slug that read leads to."""
    read = services._taken_slugs
    reads = []

    def taken_then_taken_by_another(group):
        slugs = read(group)
        if len(reads) < times:
            slug = slug_for(group.name, slugs.__contains__)
            WorkflowGroup.objects.create(name=f"concurrent {slug}", slug=slug)
        reads.append(group.name)
        return slugs

    monkeypatch.setattr(services, "_taken_slugs", taken_then_taken_by_another)
    return reads


def test_a_slug_taken_between_the_read_and_the_insert_is_chosen_again(db, monkeypatch):
    reads = _taken_by_another_after_each_read(monkeypatch, times=1)
    group = group_save(WorkflowGroup(name="Tools"))
    group.refresh_from_db()
    assert group.slug == "tools-2"
    assert len(reads) == 2  # the first read, and the one after the clash
    assert set(WorkflowGroup.objects.values_list("slug", flat=True)) == {"tools", "tools-2"}


def test_a_stale_read_of_the_taken_slugs_still_ends_with_a_distinct_slug(db, monkeypatch):
    group_save(WorkflowGroup(name="tools"))
    read = services._taken_slugs
    stale = [set()]
    monkeypatch.setattr(
        services, "_taken_slugs", lambda group: stale.pop() if stale else read(group)
    )
    group = group_save(WorkflowGroup(name="TOOLS!"))
    assert group.slug == "tools-2"


def test_a_save_that_loses_every_slug_raises_a_clear_error(db, monkeypatch):
    _taken_by_another_after_each_read(monkeypatch, times=services.SLUG_ATTEMPTS + 1)
    group = WorkflowGroup(name="Tools")
    with pytest.raises(IntegrityError, match="No free slug for the workflow group 'Tools'"):
        group_save(group)
    assert group.slug == ""
    assert not WorkflowGroup.objects.filter(name="Tools").exists()


def test_a_taken_name_still_fails_as_before(db):
    group_save(WorkflowGroup(name="tools"))
    duplicate = WorkflowGroup(name="tools")
    with pytest.raises(IntegrityError):
        group_save(duplicate)
    assert duplicate.slug == ""
    assert WorkflowGroup.objects.count() == 1
