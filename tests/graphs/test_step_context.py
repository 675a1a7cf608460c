"""The context of any step of a run, rebuilt from its stored history (graphs/history/
step_context.py), and ad-hoc JSONata evaluated there with a run's own bounds."""

from __future__ import annotations

import pytest

from graphs.execution.runs import RunRequest, workflow_call
from graphs.history.step_context import (
    ExpressionRefused,
    StepNotFound,
    step_context,
    step_evaluate,
)
from graphs.models import NodeExecution

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def summed(loops) -> int:
    outcome = workflow_call(RunRequest(name="sum_to", arguments={"n": 3}))
    assert outcome.succeeded
    return outcome.run_id


def test_each_step_sees_the_latest_output_of_every_node_before_it(summed):
    # entry, step, more, step, more, step, more, result, exit
    first = step_context(run_id=summed, index=0)
    assert (first.node_id, first.context, first.previous, first.counts) == ("entry", {}, None, {})
    later = step_context(run_id=summed, index=5)
    assert (later.node_id, later.iteration) == ("step", 3)
    assert later.context == {"entry": {"n": 3}, "step": {"i": 2, "sum": 3}, "more": "step"}
    assert later.previous == "step"
    assert later.counts == {"entry": 1, "step": 2, "more": 2}
    assert later.as_json()["context"]["executionCount"] == {"entry": 1, "step": 2, "more": 2}


def test_an_expression_sees_what_the_step_saw_history_functions_included(summed):
    step = step_context(run_id=summed, index=5)
    assert step_evaluate(step, "$nodeExecutions('step').sum") == [1, 3]
    assert step_evaluate(step, "$previousNode(2)") == {"i": 2, "sum": 3}
    assert step_evaluate(step, "$.missing") is None


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("$.step.sum +", "does not parse"),
        ("(", "at character"),
        ("", "Send the JSONata to evaluate"),
        ("$nodeExecution(1, 0)", "needs a node id string"),
        ("x" * 10_001, "over the limit of 10,000"),
        (
            "($f := function($n) { $n = 0 ? 0 : 1 + $f($n - 1) }; $f(100000))",
            "deeper than",
        ),
    ],
)
def test_a_bad_or_unbounded_expression_is_refused_saying_why(summed, expression, message):
    step = step_context(run_id=summed, index=5)
    with pytest.raises(ExpressionRefused, match=message.replace("(", r"\(")):
        step_evaluate(step, expression)


def test_an_unknown_step_or_run_names_the_steps_there_are(summed):
    with pytest.raises(StepNotFound, match=r"has no step 99: its steps are 0 to 8"):
        step_context(run_id=summed, index=99)
    with pytest.raises(StepNotFound, match="No run 424242"):
        step_context(run_id=424242, index=0)


def test_a_masked_or_cut_output_is_marked_not_faithful(summed):
    NodeExecution.objects.filter(run_id=summed, index=1).update(truncated=True)
    assert step_context(run_id=summed, index=2).unfaithful == ["step"]
    # A later, whole output of the same node is what `$` shows then.
    assert step_context(run_id=summed, index=5).unfaithful == []
