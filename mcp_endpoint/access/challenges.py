"""The refusals of authentication and scope, and their `WWW-Authenticate` challenges (RFC 6750,
section 3; RFC 9728, section 5.1 for `resource_metadata`)."""

from __future__ import annotations

from dataclasses import dataclass

REALM = 'Bearer realm="switchyard"'
# How a caller authenticates, as every refusal that asks for a key says it.
KEY_HOW = (
    "send an API key as 'Authorization: Bearer KEY' (or 'X-API-Key: KEY'). "
    "Keys are created in the admin or with manage.py create_api_key."
)
# How a caller gets a scope it lacks, as every refusal for a scope says it.
SCOPE_HOW = (
    "Use an API key with that scope (ask an administrator for one), or sign in again with "
    "OAuth asking for it (your user needs the right behind it)."
)
# Longest error_description a challenge carries: the body says the rest.
DESCRIPTION_CHARACTERS = 300


@dataclass(frozen=True)
class Refusal:
    status: int
    message: str
    headers: dict[str, str]


def scope_refusal(scope: str, message: str) -> Refusal:
    """403 for a caller without `scope`, with the challenge that names it (RFC 6750, 3.1:
    `error="insufficient_scope"`, `scope`), as the MCP authorization spec asks of a refusal
    for scope; `message` (which says how to fix it) is the body's and the description's."""
    return Refusal(403, message, scope_challenge(scope, message))


def scope_challenge(scope: str, message: str) -> dict[str, str]:
    """The `WWW-Authenticate` header of a refusal for the missing `scope`."""
    return challenge(error="insufficient_scope", scope=scope, description=message)


def challenge(
    *,
    error: str | None = None,
    description: str = "",
    scope: str | None = None,
    resource_metadata: str | None = None,
) -> dict[str, str]:
    """The `WWW-Authenticate` header of a refusal: the realm, then the `error` (none when no
    credentials came, RFC 6750 3.1), the `scope` asked for, where the resource's metadata is
    (when OAuth is offered) and the `description`."""
    parameters = [REALM]
    if resource_metadata is not None:
        parameters.append(f"resource_metadata={_quoted(resource_metadata)}")
    if error is not None:
        parameters.append(f"error={_quoted(error)}")
    if scope is not None:
        parameters.append(f"scope={_quoted(scope)}")
    if error is not None:
        parameters.append(f"error_description={_quoted(_description(description))}")
    return {"WWW-Authenticate": ", ".join(parameters)}


def _description(text: str) -> str:
    """`text` in the characters RFC 6750 allows an error_description (printable ASCII but `"`
    and `\\`): quotes become apostrophes, a backslash a slash, anything else a space; bounded."""
    text = text.replace('"', "'").replace("\\", "/")
    text = "".join(c if " " <= c <= "~" else " " for c in text)
    if len(text) > DESCRIPTION_CHARACTERS:
        text = text[: DESCRIPTION_CHARACTERS - 3] + "..."
    return text


def _quoted(value: str) -> str:
    """`value` as an HTTP quoted-string (RFC 9110, 5.6.4): `"` and `\\` escaped, no line
    breaks or other control characters."""
    value = "".join(c if c == "\t" or " " <= c <= "~" else " " for c in value)
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
