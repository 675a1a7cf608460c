"""Runs waiting at approval nodes: the wait (waits), the decision (decisions), the timeout's
timer (timer) and the operator's notification (notify)."""
