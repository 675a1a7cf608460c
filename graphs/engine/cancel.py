"""Cancelling a running graph from another thread."""

from __future__ import annotations

import threading


class CancelToken:
    """Set once, from any thread; a run checks it before each node and while it waits."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._reason = ""

    def cancel(self, reason: str = "") -> None:
        """Ask the run to stop. The first reason given is the one kept."""
        with self._lock:
            if not self._event.is_set():
                self._reason = reason
                self._event.set()

    @property
    def cancelled(self) -> bool:
        """Whether ``cancel`` has been called."""
        return self._event.is_set()

    @property
    def reason(self) -> str:
        """The reason given to the first ``cancel`` call ("" if none)."""
        return self._reason

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``, waking at once on cancel; True if cancelled."""
        return self._event.wait(seconds)
