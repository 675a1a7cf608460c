"""How history values are shown: JSON payloads (marked when truncated), durations, the bars
of the timeline. Plain functions, so the pages' formatting is tested without a request."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from graphs.payloads import TRUNCATED_KEY
from graphs.selectors import Step, StepPages

# A bar never narrower than this (percent of the timeline), so a microsecond node still shows.
MIN_BAR_PERCENT = 0.4


@dataclass(frozen=True)
class Payload:
    """A JSON value as text to show; `truncated` when the history kept only a preview."""

    text: str
    truncated: bool = False
    bytes: int = 0


def payload(value: Any) -> Payload:
    """The value pretty-printed, or the preview of a payload stored over the size cap."""
    if isinstance(value, dict) and value.get(TRUNCATED_KEY) is True:
        preview = str(value.get("preview", ""))
        return Payload(preview, truncated=True, bytes=int(value.get("bytes") or 0))
    return Payload(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def duration(milliseconds: float | None) -> str:
    """A duration for people: < 0.01 ms, 0.04 ms, 12.3 ms, 1.25 s, 3 min 05 s."""
    if milliseconds is None:
        return "—"
    if milliseconds < 0.005:
        # An entry or exit node takes microseconds; "0.00 ms" would read as not timed.
        return "< 0.01 ms"
    if milliseconds < 1:
        return f"{milliseconds:.2f} ms"
    if milliseconds < 1000:
        return f"{milliseconds:.1f} ms"
    seconds = milliseconds / 1000
    if seconds < 60:
        return f"{seconds:.2f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


@dataclass(frozen=True)
class Evaluated:
    """What a node evaluated, as the timeline shows it: a one-line summary, and a value to
    expand (an mcp call's arguments, a transform's expression) under `label`."""

    summary: str = ""
    label: str = ""
    value: Any = None
    is_expression: bool = False


def evaluated(node_type: str, detail: Any) -> Evaluated:
    """The `detail` of a node execution: mcp `{server, tool, arguments}`, transform `{expr}`,
    switch `{target, matched}` (a condition's 0-based position, or "default")."""
    if not isinstance(detail, dict) or detail.get(TRUNCATED_KEY) is True:
        return Evaluated(label="Evaluated", value=detail) if detail is not None else Evaluated()
    if node_type == "mcp":
        return Evaluated(
            summary=f"{detail.get('server')}.{detail.get('tool')}",
            label="Arguments sent",
            value=detail.get("arguments"),
        )
    if node_type == "transform":
        return Evaluated(label="Expression", value=detail.get("expr"), is_expression=True)
    if node_type == "switch":
        matched = detail.get("matched")
        rule = f"condition {matched + 1}" if isinstance(matched, int) else str(matched)
        return Evaluated(summary=f"→ {detail.get('target')} ({rule})")
    return Evaluated(label="Evaluated", value=detail)


@dataclass(frozen=True)
class TimelineRow:
    step: Step
    evaluated: Evaluated
    # The bar's start and width, in percent of the run's span.
    left: float
    width: float


def timeline(steps: list[Step], *, now: datetime) -> list[TimelineRow]:
    """Each step placed on the time axis of the steps shown: from the first one's start to
    the last one's end (a step still running ends `now`).

    Not from the run's start: the time before its first node is the run being recorded,
    which on a run of a few milliseconds pushed the entry node most of the way along."""
    if not steps:
        return []
    origin = min(step.execution.started_at for step in steps)

    def span(step: Step) -> tuple[float, float]:
        start = (step.execution.started_at - origin).total_seconds() * 1000
        length = step.execution.duration_ms
        # A running row's stored duration is the 0 it was written with as it started.
        if length is None or step.execution.status == "running":
            length = max((now - step.execution.started_at).total_seconds() * 1000, 0.0)
        return start, length

    spans = [span(step) for step in steps]
    total = max(start + length for start, length in spans) or 1.0
    return [
        TimelineRow(
            step,
            evaluated(step.execution.node_type, step.execution.detail),
            left=min(start / total * 100, 100 - MIN_BAR_PERCENT),
            width=max(length / total * 100, MIN_BAR_PERCENT),
        )
        for step, (start, length) in zip(steps, spans, strict=True)
    ]


def step_links(pages: StepPages) -> dict[str, str]:
    """The links between pages of a run's node executions (`?from=<index>`), for the
    `graphs/step_pages.html` include; empty where there is no such page."""

    def link(start: int | None) -> str:
        return f"?from={start}" if start is not None else ""

    return {
        "first_link": link(0 if pages.start else None),
        "earlier_link": link(pages.earlier),
        "later_link": link(pages.later),
        "final_link": link(pages.final),
    }


def step_link(pages: StepPages, index: int | None) -> str:
    """A link to node execution `index`: its anchor when this page shows it, else the page
    that does; empty for None."""
    if index is None:
        return ""
    shown = pages.start <= index < pages.end
    return f"{'' if shown else f'?from={pages.holding(index)}'}#step-{index}"
