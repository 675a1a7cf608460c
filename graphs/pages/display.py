"""How history values are shown: JSON payloads (marked when truncated), durations, the bars
of the timeline. Plain functions, so the pages' formatting is tested without a request."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from graphs.engine.nesting import deeper_than
from graphs.execution.payloads import TRUNCATED_KEY
from graphs.history.selectors import Step, StepPages

# A bar never narrower than this (percent of the timeline), so a microsecond node still shows.
MIN_BAR_PERCENT = 0.4


# What a page shows of its payloads (issue 25, item 14). Pretty-printed, JSON indents every
# line by two spaces a level: 18 KB of nested arrays in one call's arguments, shown in each
# step that saw them, made a 65 MB run page. A payload is shown whole only when it nests at
# most SHOWN_DEPTH levels and its text fits in SHOWN_CHARS and in what is left of the page's
# PAGE_CHARS; otherwise its first PREVIEW_CHARS characters, and a link to download it whole.
# A page's payloads so take at most PAGE_CHARS + PREVIEW_CHARS each (before HTML escaping).
SHOWN_DEPTH = 20
SHOWN_CHARS = 20_000
PREVIEW_CHARS = 2_000
PAGE_CHARS = 500_000


@dataclass(frozen=True)
class Payload:
    """A JSON value as text to show. `truncated`: the history kept only a preview of it,
    `bytes` long. `clipped`: this page shows only the start of it, whose whole text is
    `chars` long (a link downloads it whole)."""

    text: str
    truncated: bool = False
    bytes: int = 0
    clipped: bool = False
    chars: int = 0


def _text(value: Any) -> tuple[str, bool]:
    """A value as JSON text, and whether only a preview of that text may be shown:
    pretty-printed within SHOWN_DEPTH levels, else on one line (its indentation would grow
    with the square of its depth)."""
    if not deeper_than(value, SHOWN_DEPTH):
        return json.dumps(value, indent=2, ensure_ascii=False, default=str), False
    try:
        return json.dumps(value, ensure_ascii=False, default=str), True
    except RecursionError:  # a row stored before values were cut to a depth on the way in
        return f"(nested deeper than {SHOWN_DEPTH} levels: download it to read it)", True


class PageBudget:
    """The characters of payloads a page still shows whole: one per rendered page, spent by
    `show` as its payloads are rendered, in order."""

    def __init__(self, chars: int = PAGE_CHARS) -> None:
        self.left = chars

    def show(self, value: Any) -> Payload:
        """The value as the page shows it: pretty-printed whole, or its start when it is too
        deep or too long for what is left (`clipped`); a payload stored over the size cap
        shows the preview the history kept (`truncated`)."""
        stored = Payload("")
        if isinstance(value, dict) and value.get(TRUNCATED_KEY) is True:
            text, too_deep = str(value.get("preview", "")), False
            stored = Payload("", truncated=True, bytes=int(value.get("bytes") or 0))
        else:
            text, too_deep = _text(value)
        if not too_deep and len(text) <= min(SHOWN_CHARS, self.left):
            self.left -= len(text)
            return replace(stored, text=text)
        preview = text[:PREVIEW_CHARS]
        self.left = max(self.left - len(preview), 0)
        return replace(stored, text=preview, clipped=True, chars=len(text))


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


def wait_length(seconds: float) -> str:
    """How long a run waited (or has left to wait) for a person: 0.4 s, 12 s, 42 min 05 s,
    3 h 05 min, 2 d 4 h. Waits are minutes to days: the node timings' minutes would say
    1439 min."""
    if seconds < 10:
        return f"{max(seconds, 0.0):.1f} s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    minutes, rest = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {rest:02d} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes:02d} min"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h"


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
    switch `{target, matched}` (a condition's 0-based position, or "default"), approval
    `{approvers, form, timeout_ms, message}` (and `mocked` in a test run)."""
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
    if node_type == "approval":
        who = detail.get("approvers") or "reviewers"
        summary = "decision mocked" if detail.get("mocked") else f"asks the {who}"
        asked = {
            key: detail[key]
            for key in ("message", "form", "timeout_ms")
            if detail.get(key) is not None
        }
        return Evaluated(summary=summary, label="Asked", value=asked or None)
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
