"""Template helpers of the review parts of the history pages: the compare page and the run
page's review form (graphs/pages/comparison.py, graphs/pages/annotations.py)."""

from __future__ import annotations

import json
from typing import Any

from django import template
from django.urls import reverse

from graphs.history.comparison import VALUE_CHARS
from graphs.history.selectors import STEPS_PER_PAGE

register = template.Library()


@register.filter
def json_text(value: Any) -> str:
    """A JSON value as indented text for a `<pre>`, at most a few times `VALUE_CHARS`
    characters (a comparison's values are previews past that already); autoescaped."""
    text = json.dumps(value, ensure_ascii=False, indent=2, default=str)
    limit = 4 * VALUE_CHARS
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


@register.filter
def has_side(difference: dict[str, Any], side: str) -> bool:
    """Whether a difference (graphs/engine/json_diff.py) has a value on `side` ("a", "b"):
    a place only one run's value has has no key on the other side."""
    return side in difference


@register.simple_tag
def step_href(run_id: int, index: int) -> str:
    """The run page's link to one node execution: the page of executions holding it."""
    page = index - index % STEPS_PER_PAGE
    return f"{reverse('graphs:run_detail', args=[run_id])}?from={page}#step-{index}"
