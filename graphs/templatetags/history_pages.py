"""Template helpers of the history pages (graphs/pages/display.py does the work)."""

from __future__ import annotations

from typing import Any

from django import template

from graphs.pages import display

register = template.Library()


@register.filter
def duration(milliseconds: float | None) -> str:
    return display.duration(milliseconds)


@register.inclusion_tag("graphs/_payload.html")
def payload(
    value: Any, label: str, prefix: str = "", index: Any = "", is_open: bool = False
) -> dict[str, Any]:
    """A collapsible, escaped JSON block with the id `prefix-index`, by which the page's
    refresh keeps it open."""
    return {
        "payload": display.payload(value),
        "label": label,
        "element_id": "-".join(str(part) for part in (prefix, index) if part != ""),
        "is_open": is_open,
    }
