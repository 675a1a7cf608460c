"""What a serving process does once it has started, before its first request."""

from __future__ import annotations

import gc


def settle_startup_objects() -> int:
    """Move every object the process has made so far (Django, the apps, their modules: about
    190,000) out of the garbage collector's reach, after one collection: a full collection
    walks every tracked object, and with these it paused the process for 100 to 180 ms about
    once every 2,000 workflow calls (docs/benchmarks.md, issue 31). They live as long as the
    process; what is made later is collected as before. Returns how many were moved."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
