"""A test run with breakpoints (graphs/execution/resuming/breakpoints.py, pauses.py): it
pauses before each (status `paused`, nothing held), its context there is rebuilt from the
history, and it is continued to the next breakpoint, stepped one node, stopped, cancelled or
left to expire; a second action on a run no longer paused is refused."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from graphs.execution.control import run_cancel
from graphs.execution.resuming.breakpoints import PauseError, pause_end, pauses_expire
from graphs.execution.resuming.going_on import resumed_runs_wait
from graphs.execution.resuming.pauses import pause_of
from graphs.execution.runs import RunRequest, workflow_call
from graphs.history.step_context import step_context, step_evaluate
from graphs.models import Run, RunPause
from tests.approval_runs import ended

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def sum_to(transactional_db):
    from tests.graph_files import import_file

    import_file("loops.yaml")


def _paused(n: int = 3, breakpoints: tuple[str, ...] = ("more",)) -> int:
    outcome = workflow_call(
        RunRequest(
            name="sum_to", arguments={"n": n}, is_test=True, breakpoints=breakpoints, caller="k"
        )
    )
    assert outcome.status == Run.Status.PAUSED, outcome
    return outcome.run_id


def _paused_again(run_id: int) -> RunPause:
    resumed_runs_wait(20)
    pause = pause_of(run_id)
    assert pause is not None, Run.objects.get(pk=run_id).status
    return pause


def test_the_run_pauses_before_its_breakpoint_with_the_context_there(sum_to):
    run_id = _paused()
    pause = pause_of(run_id)
    assert (pause.node_id, pause.index, pause.iteration) == ("more", 2, 1)
    run = Run.objects.get(pk=run_id)
    assert (run.status, run.node_count, run.worker) == (Run.Status.PAUSED, 2, "")
    step = step_context(run_id=run_id, index=2)
    assert (step.node_id, step.status) == ("more", "paused")
    assert step.context == {"entry": {"n": 3}, "step": {"i": 1, "sum": 1}}
    assert step.counts == {"entry": 1, "step": 1}
    assert step_evaluate(step, "$.step.sum + $executionCount('step')") == 2


def test_continue_goes_to_the_next_breakpoint_step_to_the_next_node_then_it_ends(sum_to):
    run_id = _paused(n=2)
    assert pause_end(run_id, "continue", "rita") == Run.Status.RUNNING
    pause = _paused_again(run_id)
    assert (pause.node_id, pause.index, pause.iteration) == ("more", 4, 2)
    pause_end(run_id, "step", "rita")
    pause = _paused_again(run_id)
    # `more` ran (not stopping there again) and the run stops before the very next node.
    assert (pause.node_id, pause.index) == ("result", 5)
    pause_end(run_id, "continue", "rita")
    run = ended(run_id)
    assert run.status == Run.Status.SUCCEEDED
    assert run.result == {"sum": 3, "steps": 2}
    assert run.node_count == 7
    endings = RunPause.objects.filter(run_id=run_id).values_list("ending", flat=True)
    assert list(endings) == ["continued", "stepped", "continued"]


def test_stop_ends_it_cancelled_and_a_second_action_is_refused(sum_to):
    run_id = _paused()
    assert pause_end(run_id, "stop", "rita") == Run.Status.CANCELLED
    run = Run.objects.get(pk=run_id)
    assert run.status == Run.Status.CANCELLED
    assert "Stopped at the breakpoint before node 'more' by rita" in run.error
    with pytest.raises(PauseError) as refused:
        pause_end(run_id, "continue", "sam")
    assert refused.value.status == 409
    assert "not paused at a breakpoint (it is cancelled)" in refused.value.message
    with pytest.raises(PauseError) as refused:
        pause_end(run_id, "jump", "sam")
    assert refused.value.status == 400


def test_a_pause_left_too_long_expires_and_a_paused_run_can_be_cancelled(sum_to, settings):
    first, second = _paused(), _paused()
    RunPause.objects.filter(run_id=first).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert pauses_expire() > 0  # the second's is not due yet: the seconds until it is
    run = Run.objects.get(pk=first)
    assert run.status == Run.Status.CANCELLED
    assert "GRAPHS_BREAKPOINT_EXPIRY_SECONDS" in run.error
    assert RunPause.objects.get(run_id=first).ending == RunPause.Ending.EXPIRED
    cancelled = run_cancel(run_id=second, reason="done looking")
    assert cancelled.status == Run.Status.CANCELLED
    assert Run.objects.get(pk=second).status == Run.Status.CANCELLED
    assert RunPause.objects.get(run_id=second).ending == RunPause.Ending.STOPPED


def test_racing_actions_at_a_pause_take_exactly_one(sum_to):
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    if connection.vendor == "sqlite":
        pytest.skip("the in-memory test SQLite refuses concurrent writers; CI races on PostgreSQL")
    run_id = _paused(n=1, breakpoints=("result",))
    actions = ["continue", "step", "stop", "continue", "step", "stop"]

    def attempt(action: str) -> str:
        try:
            pause_end(run_id, action, f"reviewer-{action}")
            return action
        except PauseError as exc:
            return str(exc.status)
        finally:
            connection.close()

    with ThreadPoolExecutor(6) as pool:
        outcomes = list(pool.map(attempt, actions))
    won = [outcome for outcome in outcomes if outcome in ("continue", "step", "stop")]
    assert len(won) == 1, outcomes
    assert outcomes.count("409") == 5, outcomes
    resumed_runs_wait(20)
    run = Run.objects.get(pk=run_id)
    expected = {"continue": Run.Status.SUCCEEDED, "step": Run.Status.PAUSED}
    assert run.status == expected.get(won[0], Run.Status.CANCELLED)
