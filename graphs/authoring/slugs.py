"""The slug of a workflow group: the last part of its MCP endpoint, `/mcp/<slug>`."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

MAX_SLUG_LENGTH = 60
_NOT_SLUG = re.compile(r"[^a-z0-9]+")


def slug_base(name: str) -> str:
    """The slug a group named `name` gets when it is free, and the start of every slug it can
    get: lower case, `[a-z0-9-]`.

    Accents are dropped ("Café" → "cafe"); a name with nothing left ("日本") becomes "server"."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    base = _NOT_SLUG.sub("-", ascii_name.lower()).strip("-")
    # Room for a suffix within the column's length.
    return base[: MAX_SLUG_LENGTH - 8].strip("-") or "server"


def slug_for(name: str, taken: Callable[[str], bool]) -> str:
    """A slug for a group named `name`: lower case, `[a-z0-9-]`, not `taken`.

    Accents are dropped ("Café" → "cafe"); a name with nothing left ("日本") becomes "server";
    a taken slug gets the first free suffix ("-2", "-3", ...). `taken` is asked about each
    candidate in turn, so it should be a lookup in slugs read beforehand (a set's
    `__contains__`), not a query each."""
    base = slug_base(name)
    slug, number = base, 1
    while taken(slug):
        number += 1
        slug = f"{base}-{number}"
    return slug
