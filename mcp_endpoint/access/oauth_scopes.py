"""Which scopes a person may give an OAuth client: at most what they may do themselves.

An API key's scopes are set by the operator who creates it; an OAuth token's are chosen by
the person who signs in on the consent page, so each scope asks of that person the Django
permission behind the same right in the admin. Checked when they consent, and again on every
call made with the token, so a right taken away leaves the tokens it let them grant as soon as
the process's memory of the token ends (oauth_tokens.REMEMBER_SECONDS, 10 s).
"""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth.base_user import AbstractBaseUser

from mcp_endpoint.models import Scope

# Who may connect MCP clients at all (the consent page refuses everyone else).
CONNECT_PERMISSION = "mcp_endpoint.connect_oauth_clients"
# What a client gets when it asks for no scope, and what a 401 challenge names: reading
# and calling the tools of the endpoint, its prompts and resources.
BASIC_SCOPES = (Scope.TOOLS_READ.value, Scope.TOOLS_EXECUTE.value, Scope.RESOURCES_READ.value)
# The permission each scope asks of a person beyond CONNECT_PERMISSION; None: that one
# suffices. Scopes missing here (workflows:admin, metrics:read: the operators' own) are for
# superusers only.
SCOPE_PERMISSIONS: dict[str, str | None] = {
    Scope.TOOLS_READ: None,
    Scope.TOOLS_EXECUTE: None,
    Scope.RESOURCES_READ: None,
    Scope.HEALTH_CHECK: None,
    Scope.RUNS_READ: "graphs.view_run",
    Scope.RUNS_DECIDE: "graphs.decide_approval",
    Scope.WORKFLOWS_WRITE: "graphs.change_workflow",
    Scope.WORKFLOWS_PUBLISH: "graphs.change_workflow",
}


def scope_words(scopes: Iterable[str]) -> list[tuple[str, str]]:
    """`scopes` with their plain words, in one order wherever people read them (the order of
    `Scope`: reading before calling before the operators' own)."""
    ranked = {scope: rank for rank, scope in enumerate(Scope.values)}
    return [
        (scope, scope_description(scope))
        for scope in sorted(set(scopes), key=lambda scope: (ranked.get(scope, len(ranked)), scope))
    ]


def scope_description(scope: str) -> str:
    """`scope` in plain words, as the consent page and the admin show it."""
    return str(Scope(scope).label) if scope in Scope.values else scope


def may_connect_clients(user: AbstractBaseUser) -> bool:
    """Whether `user` may connect MCP clients with OAuth (an active user with the permission)."""
    return bool(user.is_active and user.has_perm(CONNECT_PERMISSION))  # type: ignore[attr-defined]


def grantable_scopes(user: AbstractBaseUser) -> frozenset[str]:
    """The scopes `user` may give a client: none without the permission to connect clients;
    with it, each scope whose right they hold (every scope for a superuser)."""
    if not may_connect_clients(user):
        return frozenset()
    if getattr(user, "is_superuser", False):
        return frozenset(Scope.values)
    return frozenset(
        scope
        for scope, permission in SCOPE_PERMISSIONS.items()
        if permission is None or user.has_perm(permission)  # type: ignore[attr-defined]
    )


def refused_scopes_reason(user: AbstractBaseUser, scopes: list[str]) -> str | None:
    """Why `user` may not give a client `scopes` (naming the scopes and the rights they
    need), or None when they may."""
    refused = [scope for scope in scopes if scope not in grantable_scopes(user)]
    if not refused:
        return None
    needs = ", ".join(
        f"{scope} needs {SCOPE_PERMISSIONS.get(scope) or 'a superuser'}" for scope in refused
    )
    return (
        f"The user {user.get_username()} may not grant {' '.join(refused)}: {needs}. Ask for "
        "fewer scopes, or ask an operator for the permission."
    )
