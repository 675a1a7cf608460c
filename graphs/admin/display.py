"""How the graphs admin shows graphs and payloads: a drawing scaled to fit the form, JSON and
YAML in `<pre class="payload">` blocks, and the stylesheet of the pages that show them
(graphs/static/graphs/admin.css). Used by `graphs.admin.workflows` and `graphs.admin.runs`."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from graphs.engine import dump_yaml
from graphs.pages.display import SHOWN_CHARS, PageBudget


def drawing_html(svg: str) -> str:
    """A drawing from `draw_graph` (which escapes every label), scaled down to fit the form,
    scrolling when it is wider still (graphs/static/graphs/admin.css)."""
    return format_html('<div class="graph-drawing">{}</div>', mark_safe(svg))


class DrawingMedia:
    """The stylesheet of the admin pages that show drawings and JSON payloads."""

    css = {"all": ["graphs/admin.css"]}


def yaml_html(value: Any) -> str:
    """A definition or a node's detail in the graph's own format, escaped: a transform's
    expression reads as its author wrote it, a line a line, not one JSON string of \\n
    escapes."""
    return format_html('<pre class="payload">{}</pre>', dump_yaml(value))


def run_payload_html(value: Any, run_id: int, part: str, *, as_yaml: bool = False) -> str:
    """A run's payload `part` (graphs/pages/downloads.py), escaped: indented JSON (or YAML)
    when the history pages would show it whole on their own; else what they show, its start
    (graphs/pages/display.py: too deep, too long, or stored truncated), saying so, with a
    link to download what the history keeps."""
    shown = PageBudget(SHOWN_CHARS).show(value)
    if as_yaml and not (shown.clipped or shown.truncated):
        return yaml_html(value)
    block = format_html('<pre class="payload">{}</pre>', shown.text)
    if shown.truncated:
        note = "<p>Stored truncated: {} bytes, only the start was kept.</p>"
        block += format_html(note, f"{shown.bytes:,}")
    if shown.clipped:
        block += format_html(
            '<p>The first {} of {} characters. <a href="{}" download>Download the whole '
            "JSON</a></p>",
            f"{len(shown.text):,}",
            f"{shown.chars:,}",
            reverse("graphs:run_payload", args=[run_id, part]),
        )
    return block
