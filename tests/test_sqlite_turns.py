"""The embedded SQLite backend's writer turns: granted in the order asked for, and a writer
that cannot get one in time goes on without it rather than waiting forever."""

from __future__ import annotations

import threading
import time

from config.sqlite.base import _Turns


def test_turns_are_granted_in_the_order_they_were_asked_for():
    turns = _Turns()
    assert turns.acquire(1)
    order: list[int] = []

    def writer(number: int) -> None:
        assert turns.acquire(5)
        order.append(number)
        turns.release()

    threads = []
    for number in range(8):
        thread = threading.Thread(target=writer, args=(number,))
        thread.start()
        threads.append(thread)
        time.sleep(0.02)  # each is waiting before the next asks
    turns.release()
    for thread in threads:
        thread.join(5)

    assert order == list(range(8))


def test_a_writer_that_waits_too_long_goes_on_and_the_turns_stay_consistent():
    turns = _Turns()
    assert turns.acquire(1)

    assert turns.acquire(0.05) is False  # gave up; not queued any more
    turns.release()

    assert turns.acquire(0.05) is True  # free again, not handed to the one that left
    turns.release()
