"""Patches and definitions under budget: a JSON Patch is applied operation by operation, each
refused before it is applied when it would put the definition over the size validation
reads (values, characters of text, depth), a copy whose source alone is too large is never
copied, at most 100 operations are applied; and a definition sent as data is measured
before any deep work."""

from __future__ import annotations

import copy
import time
import tracemalloc

import jsonpatch
import pytest
import yaml

from graphs.authoring.drafts import DraftRefused, draft_update
from graphs.authoring.patching import (
    MAX_PATCH_OPERATIONS,
    PatchRefused,
    apply_patch_within_budget,
    measure,
)
from graphs.authoring.validation import validate_workflow
from graphs.engine.checks.all_checks import MAX_CHARS, MAX_ITEMS
from graphs.models import Workflow
from tests.graph_files import FILES, OPERATOR

pytestmark = pytest.mark.timeout(60)

LOOPS = yaml.safe_load((FILES / "loops.yaml").read_text())
DOUBLE_TOOLS = {"op": "copy", "from": "/tools", "path": "/tools/-"}


def test_the_copy_doubling_bomb_is_refused_at_the_operation_that_would_go_over_quickly():
    document = copy.deepcopy(LOOPS)
    tracemalloc.start()
    started = time.monotonic()
    try:
        with pytest.raises(PatchRefused) as refused:
            apply_patch_within_budget(document, [DOUBLE_TOOLS] * 40)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert time.monotonic() - started < 5
    assert peak < 100 * 2**20
    message = str(refused.value)
    assert message.startswith("The patch's operation ")
    index = int(message.split()[3])
    assert 5 < index < 40  # several doublings fit; one of them is the first that does not
    assert "(copy '/tools/-') is refused, before it was applied: the value at '/tools'" in message
    assert f"more than {MAX_CHARS:,} characters of text (the limit" in message
    assert "send the whole new definition as `definition` instead of a patch" in message
    assert document == LOOPS  # the document given is left alone


def test_a_copy_whose_source_alone_is_over_budget_is_refused_before_anything_is_copied(
    monkeypatch,
):
    document = {"big": [[0] * 999 for _ in range(150)], "small": 1}  # 150,003 values
    monkeypatch.setattr(
        jsonpatch.CopyOperation, "apply", lambda *args: pytest.fail("the copy was made")
    )

    with pytest.raises(PatchRefused) as refused:
        apply_patch_within_budget(document, [{"op": "copy", "from": "/big", "path": "/again"}])

    assert str(refused.value).startswith(
        "The patch's operation 0 (copy '/again') is refused, before it was applied: the value "
        f"at '/big' would make the definition hold more than {MAX_ITEMS:,} values (the limit; "
        "it holds 150,003 values"
    )


def test_what_a_patch_takes_away_makes_room_for_what_it_writes():
    document = {"big": [[0] * 999 for _ in range(150)]}
    patch = [
        {"op": "remove", "path": "/big"},
        {"op": "add", "path": "/again", "value": [[1] * 999 for _ in range(150)]},
    ]

    patched = apply_patch_within_budget(document, patch)

    assert measure(patched).values == 150_002
    # Replacing one big value with another counts off the one it replaces.
    replaced = apply_patch_within_budget(document, [{**patch[1], "path": "/big"}])
    assert replaced["big"][0][0] == 1


def test_what_a_patch_writes_in_all_is_held_to_a_whole_definition():
    value = [[0] * 999 for _ in range(120)]  # 120,121 values
    patch = [
        {"op": "add", "path": "/a", "value": value},
        {"op": "remove", "path": "/a"},
        {"op": "add", "path": "/a", "value": value},
    ]

    with pytest.raises(PatchRefused) as refused:
        apply_patch_within_budget({}, patch)

    assert str(refused.value).startswith(
        "The patch's operation 2 (add '/a') is refused, before it was applied: the patch "
        f"would write more than {MAX_ITEMS:,} values in all, more than a whole definition "
        "may hold (the limit)."
    )


def test_a_value_written_too_deep_is_refused():
    deep: dict = {}
    inner = deep
    for _ in range(99):
        inner["x"] = {}
        inner = inner["x"]

    with pytest.raises(PatchRefused) as refused:
        apply_patch_within_budget({"a": {}}, [{"op": "add", "path": "/a/b", "value": deep}])

    assert "operation 0 (add '/a/b') is refused: it would make the definition nest more " in (
        str(refused.value)
    )
    assert "than 100 levels deep (the limit)" in str(refused.value)


def test_at_most_100_operations_are_applied():
    touch = {"op": "replace", "path": "/version", "value": "1.0"}

    assert apply_patch_within_budget(LOOPS, [touch] * MAX_PATCH_OPERATIONS) == LOOPS
    with pytest.raises(PatchRefused) as refused:
        apply_patch_within_budget(LOOPS, [touch] * (MAX_PATCH_OPERATIONS + 1))

    assert str(refused.value).startswith(
        "The patch holds 101 operations; at most 100 are applied at once. Send the changes in "
        "several updates"
    )


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        (
            [{"op": "replace", "path": "/version", "value": "2.0"}, {"op": "jump", "path": "/"}],
            "The patch cannot be applied: it is not a JSON Patch (RFC 6902): operation 1 is "
            "not one: Unknown operation 'jump'",
        ),
        (
            [{"op": "remove", "path": "/tools/9"}],
            "The patch cannot be applied: operation 0 (remove '/tools/9'): ",
        ),
    ],
)
def test_a_bad_operation_is_named_by_its_index(patch, message):
    with pytest.raises(PatchRefused) as refused:
        apply_patch_within_budget(LOOPS, patch)

    assert str(refused.value).startswith(message)


@pytest.mark.django_db
def test_update_workflow_refuses_the_bomb_and_stores_nothing():
    from tests.graph_files import import_file

    import_file("loops.yaml")
    workflow = Workflow.objects.get(name="is_zero")

    with pytest.raises(DraftRefused) as refused:
        draft_update(name="is_zero", caller=OPERATOR, patch=[DOUBLE_TOOLS] * 30)

    assert "is refused, before it was applied" in refused.value.message
    assert workflow.versions.count() == 1


@pytest.mark.django_db
def test_a_definition_too_large_as_data_is_refused_before_anything_is_looked_up(
    django_assert_num_queries,
):
    document = copy.deepcopy(LOOPS)
    document["tools"][0]["description"] = ["x"] * (MAX_ITEMS + 1)

    with django_assert_num_queries(0):
        report = validate_workflow(document, caller=OPERATOR)

    [problem] = report.problems
    assert (problem.code, problem.path) == ("definition_too_large", "")
    assert problem.message == (
        f"the definition holds more than {MAX_ITEMS:,} values, over the limit a definition is "
        "read within; split its tools into several definitions"
    )
