"""A run's payloads whole, for the links the pages put under a preview (graphs/pages/display.py
shows at most the start of a payload that is too deep or too long for its page)."""

from __future__ import annotations

import re
from typing import Any

from graphs.models import NodeExecution, Run

# A payload of a run, as the links name it: the run's arguments or result, or the output or
# detail (what it evaluated) of its node execution with that index.
_PART = re.compile(r"(arguments|result)|(output|detail)-(\d{1,9})")


class NoSuchPayload(LookupError):
    """No such run, node execution or part of one."""


def input_part(index: int) -> str:
    """The part a node execution's input is: the output of the one before, or the run's
    arguments for the first."""
    return f"output-{index - 1}" if index else "arguments"


def run_payload(*, run_id: int, part: str) -> Any:
    """The payload `part` of run `run_id` as the history keeps it; `NoSuchPayload` when there
    is none."""
    match = _PART.fullmatch(part)
    try:
        if match is None:
            raise NoSuchPayload(part)
        if match[1]:
            return Run.objects.values_list(match[1], flat=True).get(pk=run_id)
        executions = NodeExecution.objects.values_list(match[2], flat=True)
        return executions.get(run_id=run_id, index=int(match[3]))
    except (Run.DoesNotExist, NodeExecution.DoesNotExist):
        raise NoSuchPayload(part) from None
