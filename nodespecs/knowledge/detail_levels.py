"""How much of a spec `get_node_details` tells, by its `detail` argument. Plain Python over
the full serialisation (serialization.py), which is never changed: each view is a new dict.

- `minimal`: enough to choose a node and fill what it cannot do without, at most about 200
  tokens a node (`MINIMAL_CHARACTERS` of JSON, 4 characters a token): `node_type`,
  `subtype`, a one-line `description` (its first sentence, cut at
  `MINIMAL_DESCRIPTION_CHARACTERS`), and the required parameters as name → type:
  `required_configurations` and `required_inputs`. When they would not fit, the last are left
  out and `more_required` counts them (ask for `standard` to see them all).
- `standard`: enough to configure and wire the node: everything but the examples and what
  only repeats the rest (the legacy `parameters` list, which restates `configurations`, and
  the `default_*` maps, derived from the defaults in the schemas).
- `full`: everything, as without `detail` with every `include_*` flag on.

A `warning` (a corrected name, a provider tool no longer offered) comes on top of any view.
"""

from __future__ import annotations

import json
import re
from typing import Any

DETAIL_LEVELS = ("minimal", "standard", "full")
MINIMAL_CHARACTERS = 800
MINIMAL_DESCRIPTION_CHARACTERS = 200
# What `standard` leaves out of the full serialisation.
_NOT_STANDARD = (
    "examples",
    "parameters",
    "default_configurations",
    "default_input_params",
    "default_output_params",
)
# Where a description's first sentence ends: a full stop (or ! or ?) before the next
# sentence's capital, not the one of an abbreviation such as "e.g.".
_SENTENCE_END = re.compile(r"(?<!e\.g\.)(?<!i\.e\.)(?<=[.!?])\s+(?=[A-Z0-9`(\"'])")


def one_line(text: str, limit: int = MINIMAL_DESCRIPTION_CHARACTERS) -> str:
    """The first sentence of `text` on one line, cut at a word to at most `limit` characters
    (an ellipsis marking the cut)."""
    sentence = _SENTENCE_END.split(" ".join(text.split()), maxsplit=1)[0]
    if len(sentence) <= limit:
        return sentence
    cut = sentence[: limit - 1]
    if " " in cut:
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:") + "…"


def _required(params: Any) -> dict[str, str]:
    """The required parameters of a schema map (`configurations`, `input_params_schema`) as
    name → type, in their order."""
    if not isinstance(params, dict):
        return {}
    return {
        name: str(param.get("type") or "any")
        for name, param in params.items()
        if isinstance(param, dict) and param.get("required")
    }


def _size(view: dict[str, Any]) -> int:
    # With the spaces json.dumps puts after separators, more than the compact JSON sent.
    return len(json.dumps(view, ensure_ascii=False))


def minimal(detail: dict[str, Any]) -> dict[str, Any]:
    """The `minimal` view of a full serialisation: at most `MINIMAL_CHARACTERS` of JSON for
    any spec whose names are within the catalog's length limits."""
    view: dict[str, Any] = {
        "node_type": detail["node_type"],
        "subtype": detail["subtype"],
        "description": one_line(str(detail.get("description") or "")),
        "required_configurations": _required(detail.get("configurations")),
        "required_inputs": _required(detail.get("input_params_schema")),
    }
    if detail.get("available") is False:
        view["available"] = False
    left_out = 0
    while _size(view) > MINIMAL_CHARACTERS and (
        view["required_inputs"] or view["required_configurations"]
    ):
        # The last first: inputs usually come from the previous node, configurations do not.
        group = view["required_inputs"] or view["required_configurations"]
        group.pop(next(reversed(group)))
        left_out += 1
        view["more_required"] = left_out
    return view


def standard(detail: dict[str, Any]) -> dict[str, Any]:
    """The `standard` view: a shallow copy without the examples and the restated parts."""
    return {key: value for key, value in detail.items() if key not in _NOT_STANDARD}


def view_at(detail: dict[str, Any], level: str) -> dict[str, Any]:
    """The view of a full serialisation at `level`, one of `DETAIL_LEVELS` (a shallow copy:
    treat nested data as read-only)."""
    if level == "minimal":
        return minimal(detail)
    if level == "standard":
        return standard(detail)
    return dict(detail)
