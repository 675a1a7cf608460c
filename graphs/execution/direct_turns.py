"""Direct runs on their way to a run thread: each caller's fair share of the threads, and the
runs whose caller left before they started.

In direct mode a workflow call's run executes on a thread of the process's run pool
(GRAPHS_DIRECT_RUN_THREADS under uvicorn); graphs/execution/follow.py asks two things here first.

- **A fair share per caller** (`SHARES`). One caller (an API key's identity) has at most
  GRAPHS_RUN_THREADS_PER_CALLER runs on the threads at once. Its further calls wait their
  turn, in order, outside the pool's queue, so another caller's run starts as soon as a
  thread is free. A waiting call takes the place of the caller's next run to end; it waits
  as long as its caller does (the client leaves, or GRAPHS_RUN_WAIT_SECONDS passes and it is
  answered that it could not start, with the share named).
- **Nobody waits for it any more** (`Ticket`). A run whose caller left before a thread took
  it (the client closed the connection or gave up waiting, or sent `notifications/cancelled`)
  never starts, and nothing is recorded: nothing ran, and nobody was told of a run. A run
  that its thread took just as its caller left is recorded, and its engine stops before the
  first node: it ends `cancelled`, saying why.

`notifications/cancelled`, or the end of a session, may reach another instance than the one
where the run waits, or runs before its row is written (graphs/execution/recorder.py), where no
query finds it: that instance leaves a note in the cache (`note_cancelled`,
`note_session_ended`), which a run that waited reads before it starts, and a running one's
process with its next heartbeat (`cancellations_noted`, graphs/execution/liveness.py).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
import time
from collections import deque
from collections.abc import Mapping

from django.core.cache import cache

from graphs.engine import CancelToken

logger = logging.getLogger(__name__)

# A run taken by its thread sooner than this after its call came in had no time to be
# cancelled from another instance: it skips the look at the cache.
_LOOK_AFTER_SECONDS = 0.05
# How long a cancellation note waits in the cache for a run that waits on another instance:
# a call waits at most GRAPHS_RUN_WAIT_SECONDS for its turn (default 120 s).
_NOTE_SECONDS = 600


class CallerShares:
    """How many runs each caller has on the run threads of this process, and the calls that
    wait for a place, in order (thread-safe; a waiting call belongs to its event loop)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, int] = {}
        self._waiting: dict[str, deque[asyncio.Future[None]]] = {}

    def holding(self, caller: str) -> int:
        """How many places `caller` holds now."""
        return self._held.get(caller, 0)

    def claim(self, caller: str, share: int) -> asyncio.Future[None] | None:
        """Take one of `caller`'s `share` places: None when taken at once, else the turn to
        await with `wait` (the caller holds all of its places, or others wait before it).
        Called in the event loop of the call."""
        with self._lock:
            held = self._held.get(caller, 0)
            if held < share and caller not in self._waiting:
                self._held[caller] = held + 1
                return None
            turn = asyncio.get_running_loop().create_future()
            self._waiting.setdefault(caller, deque()).append(turn)
            return turn

    async def wait(self, caller: str, turn: asyncio.Future[None]) -> None:
        """Wait for a place that `claim` could not give at once; it is then held. Cancelled
        (the call gave up), the call holds no place: one handed to it meanwhile is given on."""
        try:
            await turn
        except asyncio.CancelledError:
            with self._lock:
                queue = self._waiting.get(caller)
                handed = queue is None or turn not in queue
                if not handed:
                    assert queue is not None
                    queue.remove(turn)
                    if not queue:
                        del self._waiting[caller]
            if handed:
                self.give_back(caller)
            raise

    def give_back(self, caller: str) -> None:
        """Give back a place (from any thread): the caller's first waiting call takes it."""
        with self._lock:
            queue = self._waiting.get(caller)
            while queue:
                turn = queue.popleft()
                if not queue:
                    del self._waiting[caller]
                if _hand(turn):
                    return
                queue = self._waiting.get(caller)
            held = self._held.get(caller, 0) - 1
            if held > 0:
                self._held[caller] = held
            else:
                self._held.pop(caller, None)


def _hand(turn: asyncio.Future[None]) -> bool:
    """Tell a waiting call, in its own loop, that a place is its own; False when its loop has
    closed. A call cancelled meanwhile gives the place on (`CallerShares.wait`)."""

    def wake() -> None:
        if not turn.done():
            turn.set_result(None)

    try:
        turn.get_loop().call_soon_threadsafe(wake)
    except RuntimeError:
        return False
    return True


# The run threads of this process, shared by every transport that asks for shares.
SHARES = CallerShares()


def _call_key(caller: str, session_id: str, request_id: str) -> str:
    # As a run's row keeps them (200 characters), so a run's process finds the note too.
    named = f"{caller[:200]}\n{session_id[:200]}\n{request_id[:200]}"
    return f"graphs:cancelled-call:{hashlib.sha256(named.encode()).hexdigest()[:40]}"


def _session_key(session_id: str) -> str:
    digest = hashlib.sha256(session_id[:200].encode()).hexdigest()
    return f"graphs:ended-session:{digest[:40]}"


class Ticket:
    """A direct run's way to its thread: the thread `take`s it, or the caller `leave`s;
    whichever comes first decides whether the run starts.

    A call of a 2025 session (its session and request ids name it for `notifications/
    cancelled`) is findable by `cancel_waiting` until `close`."""

    def __init__(self, caller: str, session_id: str, request_id: str) -> None:
        self._lock = threading.Lock()
        self._left = ""
        self._token: CancelToken | None = None
        self._since = time.monotonic()
        self.session_id = session_id
        self._key = _call_key(caller, session_id, request_id) if session_id and request_id else ""
        if self._key:
            with _tickets_lock:
                _tickets[self._key] = self

    @property
    def left(self) -> str:
        """Why the caller left, "" while it has not."""
        return self._left

    def take(self) -> CancelToken | None:
        """On the run's thread: the cancel token to run with, or None when the caller has
        left (the run must not start)."""
        if self._key and time.monotonic() - self._since > _LOOK_AFTER_SECONDS:
            noted = _noted(self._key)
            if noted is not None:
                self.leave(noted)
        with self._lock:
            if self._left:
                return None
            self._token = CancelToken()
            return self._token

    def leave(self, reason: str) -> bool:
        """The caller left: the run does not start, or, taken already, stops before its next
        node. True when it had not started."""
        with self._lock:
            if not self._left:
                self._left = reason
            token = self._token
        if token is None:
            return True
        token.cancel(reason)
        return False

    def close(self) -> None:
        """The call is over: `cancel_waiting` no longer finds it."""
        if self._key:
            with _tickets_lock:
                if _tickets.get(self._key) is self:
                    del _tickets[self._key]


_tickets: dict[str, Ticket] = {}
_tickets_lock = threading.Lock()


def cancel_waiting(*, caller: str, session_id: str, request_id: str, reason: str) -> bool:
    """`notifications/cancelled` for a direct run of this process: True when the run had not
    started and now never will. One that had started is told to stop too (before its next
    node), and False: its row says the rest."""
    with _tickets_lock:
        ticket = _tickets.get(_call_key(caller, session_id, request_id))
    return ticket is not None and ticket.leave(reason)


def cancel_session(session_id: str, reason: str) -> int:
    """The session ended: its direct runs still waiting for a thread never start; how many."""
    with _tickets_lock:
        waiting = [ticket for ticket in _tickets.values() if ticket.session_id == session_id]
    return sum(ticket.leave(reason) for ticket in waiting)


def _noted(key: str) -> str | None:
    try:
        noted = cache.get(key)
    except Exception:  # the cache is down: the run starts, as it would have without a note
        logger.warning("Could not look for a cancellation note in the cache", exc_info=True)
        return None
    return None if noted is None else str(noted)


def note_cancelled(*, caller: str, session_id: str, request_id: str, reason: str) -> None:
    """Leave word that a call was cancelled, for a run of it that waits for its thread on
    another instance (it reads it before it starts)."""
    try:
        cache.set(_call_key(caller, session_id, request_id), reason, _NOTE_SECONDS)
    except Exception:  # the cache is down: the call's own instance still drops it if it can
        logger.warning("Could not note the cancellation of a call in the cache", exc_info=True)


def note_session_ended(session_id: str, reason: str) -> None:
    """Leave word that a session ended, for its runs that another instance runs before their
    rows are written (its process reads it with its next heartbeat)."""
    try:
        cache.set(_session_key(session_id), reason, _NOTE_SECONDS)
    except Exception:  # the cache is down: the runs this instance found are cancelled
        logger.warning("Could not note the end of a session in the cache", exc_info=True)


def cancellations_noted(calls: Mapping[int, tuple[str, str, str]]) -> dict[int, str]:
    """Of runs by id, each with the (caller, session id, request id) of its call: those that
    another instance noted cancelled (their call, or their session ended), with the reason.
    One read of the cache; none for runs outside a session."""
    keys = {
        run_id: (_call_key(*call), _session_key(call[1]))
        for run_id, call in calls.items()
        if call[1]
    }
    if not keys:
        return {}
    try:
        noted = cache.get_many([key for pair in keys.values() for key in pair])
    except Exception:  # the cache is down: the runs go on, as they would without a note
        logger.warning("Could not look for cancellation notes in the cache", exc_info=True)
        return {}
    found = {}
    for run_id, (call, session) in keys.items():
        reason = noted.get(call, noted.get(session))
        if reason is not None:
            found[run_id] = str(reason)
    return found
