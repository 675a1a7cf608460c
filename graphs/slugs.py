"""The slug of a workflow group: the last part of its MCP endpoint, `/mcp/<slug>`."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

MAX_SLUG_LENGTH = 60
_NOT_SLUG = re.compile(r"[^a-z0-9]+")


def slug_for(name: str, taken: Callable[[str], bool]) -> str:
    """A slug for a group named `name`: lower case, `[a-z0-9-]`, not `taken`.

    Accents are dropped ("Café" → "cafe"); a name with nothing left ("日本") becomes "server";
    a taken slug gets the first free suffix ("-2", "-3", ...)."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    base = _NOT_SLUG.sub("-", ascii_name.lower()).strip("-")
    # Room for a suffix within the column's length.
    base = base[: MAX_SLUG_LENGTH - 8].strip("-") or "server"
    slug, number = base, 1
    while taken(slug):
        number += 1
        slug = f"{base}-{number}"
    return slug
