"""Direct runs on their way to a run thread (issue 24, "No recursion"): one caller holds at most
its share of the threads while other callers' runs start, and a run whose caller left before
a thread took it never starts (graphs/execution/direct_turns.py, graphs/execution/follow.py).

The runs here are stand-ins (`workflow_call` replaced) that hold their thread until released,
so that the tests decide when threads are busy."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connections

from graphs.execution import control, direct_turns, follow
from graphs.execution.direct_turns import CallerShares, Ticket
from graphs.execution.follow import RunEnded, RunStarted, RunWaiting, Threads, run_follow
from graphs.execution.runs import RunOutcome, RunRequest, WorkflowCallError

pytestmark = [pytest.mark.timeout(30)]


def test_a_caller_takes_places_up_to_its_share_then_waits_its_turn_in_order():
    async def scenario() -> None:
        shares = CallerShares()
        assert shares.claim("a", 2) is None
        assert shares.claim("a", 2) is None
        first, second = shares.claim("a", 2), shares.claim("a", 2)
        assert first is not None
        assert second is not None
        assert shares.claim("b", 2) is None  # another caller is not held up
        shares.give_back("a")
        await asyncio.wait_for(shares.wait("a", first), 1)
        assert not second.done()
        assert shares.holding("a") == 2  # the place went from one call to the next
        shares.give_back("a")
        await asyncio.wait_for(shares.wait("a", second), 1)
        for _ in range(2):
            shares.give_back("a")
        shares.give_back("b")
        assert (shares.holding("a"), shares.holding("b")) == (0, 0)
        assert shares.claim("a", 2) is None

    asyncio.run(scenario())


@pytest.mark.parametrize("cancelled", ["before the place is handed", "as it is handed"])
def test_a_waiting_call_that_gives_up_passes_its_place_on(cancelled):
    async def scenario() -> None:
        shares = CallerShares()
        assert shares.claim("a", 1) is None
        first, second = shares.claim("a", 1), shares.claim("a", 1)
        waiting = asyncio.ensure_future(shares.wait("a", first))
        await asyncio.sleep(0)
        if cancelled == "before the place is handed":
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)
            shares.give_back("a")
        else:
            shares.give_back("a")  # handed to the first waiter, which gives up before it runs
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)
        await asyncio.wait_for(shares.wait("a", second), 1)
        assert shares.holding("a") == 1
        shares.give_back("a")
        assert shares.holding("a") == 0

    asyncio.run(scenario())


def test_a_ticket_taken_as_its_caller_leaves_stops_its_run_and_one_left_first_never_starts():
    taken = Ticket("c", "", "")
    token = taken.take()
    assert token is not None
    assert taken.leave("gone") is False
    assert token.cancelled
    assert token.reason == "gone"

    left = Ticket("c", "", "")
    assert left.leave("gone") is True
    assert left.take() is None
    assert left.left == "gone"


def test_a_cancellation_noted_by_another_instance_stops_a_run_that_waited(monkeypatch):
    monkeypatch.setattr(direct_turns, "_LOOK_AFTER_SECONDS", 0.0)
    direct_turns.note_cancelled(caller="c", session_id="s", request_id="9", reason="cancelled")
    ticket = Ticket("c", "s", "9")
    time.sleep(0.01)
    assert ticket.take() is None
    assert ticket.left == "cancelled"
    ticket.close()
    assert Ticket("c", "s", "10").take() is not None  # another call of the session runs


class StandIns:
    """Stand-in runs: each holds its thread until `release`; `started` lists their callers."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.released = threading.Event()

    def workflow_call(self, request, *, progress=None, cancel=None, started=None) -> RunOutcome:
        self.started.append(request.caller)
        run_id = len(self.started)
        if started is not None:
            started(run_id)
        self.released.wait(10)
        return RunOutcome(run_id, "succeeded", {"caller": request.caller})


@pytest.fixture
def runs(monkeypatch) -> StandIns:
    stand_ins = StandIns()
    monkeypatch.setattr(follow, "workflow_call", stand_ins.workflow_call)
    yield stand_ins
    stand_ins.released.set()


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    executor = ThreadPoolExecutor(2, thread_name_prefix="test-run")
    yield executor
    executor.shutdown(wait=True)


def threads_on(pool: ThreadPoolExecutor, share: int | None = None) -> Threads:
    def run(work):
        return asyncio.get_running_loop().run_in_executor(pool, work)

    return Threads(short=run, run=run, run_share=share)


def call(caller: str, session_id: str = "", request_id: str = "") -> RunRequest:
    return RunRequest(
        name="stand_in", arguments={}, caller=caller, session_id=session_id, request_id=request_id
    )


async def first_event(events, seconds: float = 2.0):
    return await asyncio.wait_for(anext(events), seconds)


def test_a_caller_past_its_share_waits_while_another_callers_run_starts_at_once(runs, pool):
    async def scenario() -> None:
        threads = threads_on(pool, share=1)  # two threads, one each
        hostile_first = run_follow(call("hostile"), threads)
        assert isinstance(await first_event(hostile_first), RunStarted)
        hostile_second = run_follow(call("hostile"), threads)
        assert await first_event(hostile_second) == RunWaiting(share=1)
        other = run_follow(call("other"), threads)
        # A thread is free: the other caller's run starts now, not after the hostile's.
        assert isinstance(await first_event(other, 1.0), RunStarted)
        assert runs.started == ["hostile", "other"]
        runs.released.set()
        assert isinstance(await first_event(hostile_first), RunEnded)
        # The hostile caller's first run ended: its second takes the place.
        assert isinstance(await first_event(hostile_second), RunStarted)
        assert isinstance(await first_event(hostile_second), RunEnded)
        for events in (hostile_first, hostile_second, other):
            await events.aclose()
        # The end comes with its thread's result, once the thread gave its place back.
        assert direct_turns.SHARES.holding("hostile") == 0

    asyncio.run(scenario())


@pytest.mark.parametrize("waits_for", ["a thread", "its share"])
def test_a_run_whose_caller_leaves_before_it_starts_never_starts(runs, pool, waits_for):
    async def scenario() -> None:
        threads = threads_on(pool, share=1 if waits_for == "its share" else None)
        busy = [run_follow(call("busy" if waits_for == "a thread" else "c"), threads)]
        if waits_for == "a thread":
            busy.append(run_follow(call("busy"), threads))
        for events in busy:
            assert isinstance(await first_event(events), RunStarted)
        waiting = run_follow(call("c"), threads)
        pending = asyncio.ensure_future(anext(waiting))
        await asyncio.sleep(0.2)
        assert not pending.done() or isinstance(pending.result(), RunWaiting)
        pending.cancel()  # the caller gave up, or its client went away
        await asyncio.gather(pending, return_exceptions=True)
        await waiting.aclose()
        runs.released.set()
        for events in busy:
            assert isinstance(await first_event(events), RunEnded)
            await events.aclose()
        await asyncio.get_running_loop().run_in_executor(pool, lambda: None)
        assert direct_turns.SHARES.holding("c") == 0
        assert len(runs.started) == len(busy)  # the one whose caller left never started

    asyncio.run(scenario())


def closing_connections(work) -> None:
    """Do `work` on this thread, then close the database connection it opened here (a thread's
    connection left open outlives the test database on PostgreSQL)."""
    try:
        work()
    finally:
        connections.close_all()


@pytest.mark.django_db
@pytest.mark.parametrize("how", ["notifications/cancelled", "the session ended"])
def test_a_cancelled_call_waiting_for_a_thread_never_starts(runs, pool, how):
    async def scenario() -> None:
        threads = threads_on(pool)
        busy = [run_follow(call("busy"), threads) for _ in range(2)]
        for events in busy:
            assert isinstance(await first_event(events), RunStarted)
        waiting = run_follow(call("c", session_id="s", request_id="7"), threads)
        pending = asyncio.ensure_future(anext(waiting))
        await asyncio.sleep(0.1)
        if how == "notifications/cancelled":
            cancel = lambda: control.run_cancel_request(  # noqa: E731
                caller="c", session_id="s", request_id="7", reason="The client cancelled"
            )
        else:
            cancel = lambda: control.session_runs_cancel(  # noqa: E731
                session_id="s", reason="The session ended"
            )
        await asyncio.to_thread(closing_connections, cancel)
        runs.released.set()
        with pytest.raises(WorkflowCallError, match="did not start"):
            await asyncio.wait_for(pending, 2)
        await waiting.aclose()
        for events in busy:
            await events.aclose()
        assert runs.started == ["busy", "busy"]

    asyncio.run(scenario())
