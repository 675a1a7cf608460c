"""A serving process moves the objects made at its start out of the garbage collector's walks:
a full collection over them (about 190,000) paused it for 100 ms and more (docs/benchmarks.md)."""

from __future__ import annotations

import gc

import pytest

from mcp_endpoint.transports.startup import settle_startup_objects
from tests.test_settings import start


@pytest.fixture
def unfrozen():
    gc.unfreeze()
    yield
    gc.unfreeze()  # the test process collects its objects again


def test_settling_moves_every_object_made_so_far_out_of_full_collections(unfrozen):
    made = len(gc.get_objects())

    settled = settle_startup_objects()

    assert settled >= made // 2  # what the collection freed is not moved
    assert len(gc.get_objects()) < settled // 100  # only what was made since is walked


# The production start's lifespan, in a fresh interpreter (it starts the approvals' timer and
# sets the switch interval, which a test process should not keep).
LIFESPAN = """
import asyncio, gc
from config import asgi
messages = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
sent = []
async def receive():
    return messages.pop(0)
async def send(message):
    sent.append(message["type"])
before = gc.get_freeze_count()
asyncio.run(asgi.application({"type": "lifespan"}, receive, send))
asgi.approval_timer.stop()
print(before, gc.get_freeze_count(), *sent)
"""


def test_the_production_start_settles_its_objects_before_its_first_request(tmp_path):
    result = start("-c", LIFESPAN, DATABASE_URL=f"sqlite:///{tmp_path}/db.sqlite3")

    assert result.returncode == 0, result.stderr
    before, after, *sent = result.stdout.split()
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert int(before) == 0
    assert int(after) > 100_000
