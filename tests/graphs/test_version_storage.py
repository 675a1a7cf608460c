"""Version history is bounded (issue 25, item 12): each update stores the whole definition
(ten 900 KB updates added 7.3 MB). A workflow keeps at most GRAPHS_MAX_VERSIONS_PER_WORKFLOW
versions, its oldest drafts pruned (never a published one, nor one a run points at), and a key
stores at most GRAPHS_STORED_BYTES_PER_KEY_PER_DAY bytes of versions a day."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db.models import F

from graphs.authoring.drafts import DraftRefused, draft_create, draft_update, version_publish
from graphs.models import Run, StoredBytes, Workflow
from nodespecs.callers import Caller

pytestmark = [pytest.mark.timeout(60), pytest.mark.django_db]

SCOPES = frozenset({"tools:read", "tools:execute", "workflows:write", "workflows:publish"})
BUILDER = Caller(actor="key:builder", scopes=SCOPES)
OTHER_BUILDER = Caller(actor="key:other", scopes=SCOPES)


def definition(name: str, description: str) -> dict:
    return {
        "version": "1.0",
        "server": {"name": f"{name}Group", "version": "1.0.0"},
        "tools": [
            {
                "name": name,
                "description": description,
                "inputSchema": {"type": "object"},
                "nodes": [
                    {"id": "entry", "type": "entry", "next": "exit"},
                    {"id": "exit", "type": "exit"},
                ],
            }
        ],
    }


def numbers(name: str) -> list[int]:
    workflow = Workflow.objects.get(name=name)
    return list(workflow.versions.order_by("number").values_list("number", flat=True))


def save(name: str, description: str, caller: Caller = BUILDER) -> int:
    return draft_update(name=name, definition=definition(name, description), caller=caller).version


def test_past_the_cap_the_oldest_drafts_nothing_needs_are_pruned(settings):
    settings.GRAPHS_MAX_VERSIONS_PER_WORKFLOW = 4
    draft_create(definition=definition("echo_back", "v1"), group=None, caller=BUILDER)
    version_publish(name="echo_back", number=1, caller=BUILDER)
    draft_update(name="echo_back", definition=definition("echo_back", "v2"), caller=BUILDER)
    workflow = Workflow.objects.get(name="echo_back")
    tested = workflow.versions.get(number=2)
    Run.objects.create(workflow=workflow, version=tested, workflow_name="echo_back", is_test=True)
    for number in range(3, 9):
        assert save("echo_back", f"v{number}") == number

    # The published version and the one a run points at stay; of the drafts, the newest.
    assert numbers("echo_back") == [1, 2, 7, 8]
    workflow.refresh_from_db()
    assert workflow.current_version.number == 1


def test_a_key_past_its_bytes_of_a_day_is_refused_saying_when_it_may_store_again(settings):
    big = "x" * 100_000
    draft_create(definition=definition("big_one", big), group=None, caller=BUILDER)
    one_version = StoredBytes.objects.get(actor=BUILDER.actor).bytes
    assert 100_000 < one_version < 101_000
    limit = settings.GRAPHS_STORED_BYTES_PER_KEY_PER_DAY = 3 * one_version + 50
    settings.GRAPHS_MAX_VERSIONS_PER_WORKFLOW = 2  # pruning gives nothing back
    assert [save("big_one", big + "2"), save("big_one", big + "3")] == [2, 3]
    used = StoredBytes.objects.get(actor=BUILDER.actor).bytes

    with pytest.raises(DraftRefused) as refused:
        save("big_one", big + "4")

    message = str(refused.value)
    assert f"would take key:builder past GRAPHS_STORED_BYTES_PER_KEY_PER_DAY ({limit:,}" in message
    assert f"{used:,} stored today); nothing was stored." in message
    assert re.search(
        r"The count starts again at \d{4}-\d\d-\d\d 00:00 UTC, in \d+ h \d\d min\.", message
    )
    assert numbers("big_one")[-1] == 3
    assert StoredBytes.objects.get(actor=BUILDER.actor).bytes == used
    # Another key has a day of its own.
    draft_create(definition=definition("small_one", "hi"), group=None, caller=OTHER_BUILDER)
    # The next day the key stores again.
    StoredBytes.objects.update(day=F("day") - timedelta(days=1))
    assert save("big_one", big + "4") == 4
    assert StoredBytes.objects.filter(actor=BUILDER.actor).count() == 1
