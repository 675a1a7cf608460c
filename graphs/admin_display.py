"""How the graphs admin shows graphs and payloads: a drawing scaled to fit the form, JSON and
YAML in `<pre class="payload">` blocks, and the stylesheet of the pages that show them
(graphs/static/graphs/admin.css). Used by `graphs.admin_workflows` and `graphs.admin_runs`."""

from __future__ import annotations

import json
from typing import Any

from django.utils.html import format_html
from django.utils.safestring import mark_safe

from graphs.engine import dump_yaml


def drawing_html(svg: str) -> str:
    """A drawing from `draw_graph` (which escapes every label), scaled down to fit the form,
    scrolling when it is wider still (graphs/static/graphs/admin.css)."""
    return format_html('<div class="graph-drawing">{}</div>', mark_safe(svg))


class DrawingMedia:
    """The stylesheet of the admin pages that show drawings and JSON payloads."""

    css = {"all": ["graphs/admin.css"]}


def json_html(value: Any) -> str:
    """A payload as indented JSON, escaped."""
    return format_html(
        '<pre class="payload">{}</pre>', json.dumps(value, indent=2, ensure_ascii=False)
    )


def yaml_html(value: Any) -> str:
    """A definition or a node's detail in the graph's own format, escaped: a transform's
    expression reads as its author wrote it, a line a line, not one JSON string of \\n
    escapes."""
    return format_html('<pre class="payload">{}</pre>', dump_yaml(value))
