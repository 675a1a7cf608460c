"""Which providers a builder may use in a workflow, and which servers become its own.

A registered provider holds what an operator gave it: stored headers and env (tokens),
and an address the operator chose. An API caller who builds workflows (an agent's key) may
call its tools only where an operator opened it to builders: per provider in the admin
("open to any builder", or a list of users), or by name in `PROVIDERS_OPEN_TO_BUILDERS`.
Keys with `workflows:admin`, people in the admin and operators' commands use every provider.

A server an API caller names in `mcpServers` itself (HTTP or SSE) becomes that caller's declared
server (`Provider.declared_by`): part of its workflows only, never in the catalog, never refreshed,
reached only where the egress policy allows (nodespecs/downstream/egress.py), and at most
`BUILDER_MAX_DECLARED_SERVERS` of them per key.
"""

from __future__ import annotations

from django.conf import settings

from nodespecs.callers import Caller
from nodespecs.models import Provider

ADMIN_SCOPE = "workflows:admin"


def declares_servers(caller: Caller) -> bool:
    """Whether a server `caller` names in a definition becomes a declared server of theirs
    (an API caller who may not start processes), rather than an operator's provider."""
    return caller.is_api_caller and not caller.may_start_processes


def _declared_by(caller: Caller, declared_by: str, declared_for_id: int | None) -> bool:
    """Whether a server declared by `declared_by` for user `declared_for_id` is `caller`'s:
    the same key, or another key of the same user."""
    same_user = declared_for_id is not None and declared_for_id == caller.user_id
    return bool(declared_by) and (declared_by == caller.actor or same_user)


def _opened(caller: Caller, name: str, declared_by: str, declared_for_id: int | None,
            open_to_builders: bool, listed: bool) -> bool:  # fmt: skip
    """The rule for a builder who is not an operator, on a provider's stored fields."""
    if declared_by:
        return _declared_by(caller, declared_by, declared_for_id)
    return open_to_builders or listed or name in settings.PROVIDERS_OPEN_TO_BUILDERS


def _unrestricted(caller: Caller) -> bool:
    return not declares_servers(caller) or caller.has_scope(ADMIN_SCOPE)


def is_own_declared(provider: Provider, caller: Caller) -> bool:
    """Whether `provider` is a server `caller` declared (with this key or another of its
    user's)."""
    return _declared_by(caller, provider.declared_by, provider.declared_for_id)


def provider_usable(provider: Provider, caller: Caller) -> bool:
    """Whether `caller` may call `provider`'s tools from a workflow it builds."""
    if _unrestricted(caller):
        return True
    fields = (provider.name, provider.declared_by, provider.declared_for_id)
    if _opened(caller, *fields, provider.open_to_builders, listed=False):
        return True
    user_id = caller.user_id
    listed = user_id is not None and provider.builders.filter(pk=user_id).exists()
    return listed and not provider.declared_by


def provider_refusal(provider: Provider, caller: Caller, server: str) -> str | None:
    """Why `caller` may not use `provider` as the workflow's server `server`, or None."""
    if provider_usable(provider, caller):
        return None
    if provider.declared_by:
        return (
            f"server {server!r}: the provider {provider.name!r} is a server another builder "
            "declared; declare your own server in mcpServers (its url and headers) instead."
        )
    return (
        f"server {server!r}: the provider {provider.name!r} is open to operators only, not to "
        "this key's builders. An operator opens it in the admin (Providers, its page: 'open "
        "to any builder' or its builders) or names it in PROVIDERS_OPEN_TO_BUILDERS; until "
        "then use a provider search_nodes shows you, or declare your own HTTP server."
    )


def usable_provider_names(caller: Caller) -> set[str]:
    """The names of every provider `caller` may use, in two queries at most."""
    providers = Provider.objects.all()
    if _unrestricted(caller):
        return set(providers.values_list("name", flat=True))
    listed: set[str] = set()
    if caller.user_id is not None:
        listed = set(providers.filter(builders=caller.user_id).values_list("name", flat=True))
    rows = providers.values_list("name", "declared_by", "declared_for_id", "open_to_builders")
    return {row[0] for row in rows if _opened(caller, *row, listed=row[0] in listed)}


def declared_server_refusal(caller: Caller) -> str | None:
    """Why `caller` may not declare one more server, or None: each key declares at most
    BUILDER_MAX_DECLARED_SERVERS (every distinct url and headers is one)."""
    limit = settings.BUILDER_MAX_DECLARED_SERVERS
    count = Provider.objects.filter(declared_by=caller.actor).count()
    if count < limit:
        return None
    return (
        f"this key has declared {count} servers, the most one key may "
        f"(BUILDER_MAX_DECLARED_SERVERS = {limit}): name one it declared before, with the same "
        "url and headers, or ask an operator to delete the ones no workflow uses."
    )
