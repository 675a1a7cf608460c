"""The scopes django-oauth-toolkit offers: the API keys' scopes, with the same meanings."""

from __future__ import annotations

from typing import Any

from oauth2_provider.scopes import BaseScopes

from mcp_endpoint.access.oauth_scopes import BASIC_SCOPES, scope_description
from mcp_endpoint.models import Scope


class ScopesBackend(BaseScopes):
    """Every `Scope`, described in plain words; a client that names none gets BASIC_SCOPES."""

    def get_all_scopes(self) -> dict[str, str]:
        return {scope: scope_description(scope) for scope in Scope.values}

    def get_available_scopes(self, *args: Any, **kwargs: Any) -> list[str]:
        return list(Scope.values)

    def get_default_scopes(self, *args: Any, **kwargs: Any) -> list[str]:
        return list(BASIC_SCOPES)
