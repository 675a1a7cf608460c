"""Values made from settings that every request reads, made once until a setting changes.

`django.conf.settings` answers each attribute through a Python call (`LazySettings`), and a
request to `/mcp` read about ten of them, a few more than once (docs/benchmarks.md, issue 31
item 4). Settings do not change while a process serves; in tests they do, through
`override_settings` or pytest-django's `settings` fixture, which both send `setting_changed`:
then every value made here is made again at its next read.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from django.core.signals import setting_changed
from django.dispatch import receiver

Value = TypeVar("Value")
_MADE: list[Any] = []


def read_once(make: Callable[[], Value]) -> Callable[[], Value]:
    """`make` (a function of settings alone), called once until a setting changes."""
    made = functools.cache(make)
    _MADE.append(made)
    return made


@receiver(setting_changed)
def _forget(**kwargs: Any) -> None:
    for made in _MADE:
        made.cache_clear()
