"""The OAuth routes: the metadata clients discover, registration, consent, tokens, and each
person's page of connected clients.

django-oauth-toolkit answers the protocol (codes, tokens, PKCE, registration, metadata);
these views put this service's rules in front of it: OAuth on or off (OAUTH_ENABLED), who
may connect clients and with which scopes (`access.oauth_scopes`), which resources a token
may be for (`access.oauth_discovery`), bounded registration, and the audit trail. Every
answer to a client is JSON; the pages are for people.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from oauth2_provider.exceptions import OAuthToolkitError
from oauth2_provider.models import AccessToken, Application, Grant, RefreshToken
from oauth2_provider.oauth2_validators import is_valid_resource_uri
from oauth2_provider.settings import oauth2_settings
from oauth2_provider.views import (
    AuthorizationView,
    OAuthServerMetadataView,
    RevokeTokenView,
    TokenView,
)
from oauth2_provider.views.dynamic_client_registration import (
    DynamicClientRegistrationManagementView,
    DynamicClientRegistrationView,
)
from oauthlib.oauth2.rfc6749.errors import CustomOAuth2Error

from mcp_endpoint.access.oauth_discovery import (
    MCP_PATH,
    QUOTED_PATH_CHARACTERS,
    authorization_server,
    oauth_absent,
    origin_of,
    protected_resource_metadata,
    resource_path,
    resource_url,
)
from mcp_endpoint.access.oauth_scopes import (
    CONNECT_PERMISSION,
    may_connect_clients,
    refused_scopes_reason,
    scope_words,
)
from mcp_endpoint.access.ratelimit import rate_limit_hit
from mcp_endpoint.oauth.audit import audit_client_event
from mcp_endpoint.oauth.client_documents import explain_document_refusal
from mcp_endpoint.oauth.validator import redirect_uri_problem
from nodespecs.models import AuditEvent

# Registration: the largest metadata document and the most redirect URIs a client may
# register, and how many registrations one address may make a minute (each makes a row).
REGISTRATION_MAX_BYTES = 16 * 1024
REGISTRATION_MAX_REDIRECT_URIS = 10
REGISTRATIONS_PER_MINUTE = 10
# Headers a browser-based client (the Inspector's page) sends to the JSON endpoints.
CORS_HEADERS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
    "Access-Control-Allow-Headers": "Authorization, Content-Type, MCP-Protocol-Version",
    "Access-Control-Max-Age": "86400",
}
View = Callable[..., HttpResponse]


def _origin(request: HttpRequest) -> str:
    """The origin the request reached (its Host validated by Django against ALLOWED_HOSTS)."""
    return origin_of(request.scheme or "http", request.get_host())


def _json_error(status: int, error: str, description: str) -> JsonResponse:
    return JsonResponse({"error": error, "error_description": description}, status=status)


def _offered(request: HttpRequest) -> JsonResponse | None:
    """The 404 of an OAuth URL while this service is not the authorization server (OAuth off,
    or an external issuer configured), or None when it is."""
    if not settings.OAUTH_ENABLED:
        return JsonResponse(oauth_absent(request.path), status=404)
    if settings.OAUTH_EXTERNAL_ISSUER:
        return _json_error(
            404,
            "not_found",
            f"No authorization server at {request.path[:QUOTED_PATH_CHARACTERS]}: tokens for "
            f"this service come from {settings.OAUTH_EXTERNAL_ISSUER}.",
        )
    return None


def _for_clients(view: View) -> View:
    """`view` as an endpoint clients call from anywhere, browsers included: no CSRF (no
    cookies count there), CORS open (no credentials), a preflight answered, and the 404 of
    `_offered` while this service is not the authorization server."""

    @csrf_exempt
    def endpoint(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.method == "OPTIONS":
            response: HttpResponse = HttpResponse(status=204)
        else:
            response = _offered(request) or view(request, *args, **kwargs)
        for name, value in CORS_HEADERS.items():
            response[name] = value
        return response

    return endpoint


@csrf_exempt
def protected_resource(request: HttpRequest, suffix: str = "") -> HttpResponse:
    """RFC 9728 metadata of an MCP endpoint: `/.well-known/oauth-protected-resource/mcp/<slug>`
    for `/mcp/<slug>`, without a suffix for `/mcp`."""
    if not settings.OAUTH_ENABLED:
        return JsonResponse(oauth_absent(request.path), status=404)
    origin = _origin(request)
    resource = resource_url(origin, "/" + suffix if suffix else "/mcp")
    if resource is None:
        return _json_error(
            404,
            "not_found",
            f"No protected resource at /{suffix[:QUOTED_PATH_CHARACTERS]}: the MCP endpoints "
            "are /mcp, /mcp/<slug> and /sse.",
        )
    response = JsonResponse(protected_resource_metadata(resource, authorization_server(origin)))
    response["Access-Control-Allow-Origin"] = "*"
    return response


server_metadata = _for_clients(OAuthServerMetadataView.as_view())
token = _for_clients(TokenView.as_view())
revoke = _for_clients(RevokeTokenView.as_view())
registration = _for_clients(DynamicClientRegistrationManagementView.as_view())
_register_with_toolkit = DynamicClientRegistrationView.as_view()


@_for_clients
def register(request: HttpRequest) -> HttpResponse:
    """RFC 7591 registration, when the operator has not turned it off: bounded in size and in
    redirect URIs, which must be HTTPS or loopback, and in registrations per address."""
    if not oauth2_settings.DCR_ENABLED:
        return _json_error(
            404,
            "registration_not_offered",
            "Dynamic Client Registration is turned off here (OAUTH_DYNAMIC_REGISTRATION). Use a "
            "Client ID Metadata Document (an HTTPS URL as client_id) or ask an operator to "
            "register your client in the admin.",
        )
    if request.method != "POST":
        return _json_error(405, "invalid_request", "Register a client with POST.")
    decision = rate_limit_hit(
        identity=f"oauth-register:{request.META.get('REMOTE_ADDR', '')}",
        limit=REGISTRATIONS_PER_MINUTE,
    )
    if not decision.allowed:
        response = _json_error(
            429,
            "invalid_request",
            f"Too many registrations from this address; retry in {decision.retry_after} s.",
        )
        response["Retry-After"] = str(decision.retry_after)
        return response
    declared = request.META.get("CONTENT_LENGTH") or "0"
    if (
        not declared.isdigit()
        or int(declared) > REGISTRATION_MAX_BYTES
        or (len(request.body) > REGISTRATION_MAX_BYTES)
    ):
        return _json_error(
            400,
            "invalid_client_metadata",
            f"The client metadata is over {REGISTRATION_MAX_BYTES} bytes: send less.",
        )
    problem = _redirect_uris_problem(request.body)
    if problem is not None:
        return _json_error(400, "invalid_redirect_uri", problem)
    return _register_with_toolkit(request)


def _redirect_uris_problem(body: bytes) -> str | None:
    """Why the redirect URIs a registration names may not be registered, or None (a body that
    is no JSON object is left to the registration view, which says so)."""
    try:
        metadata = json.loads(body)
    except ValueError:
        return None
    uris = metadata.get("redirect_uris") if isinstance(metadata, dict) else None
    if not isinstance(uris, list):
        return None
    if len(uris) > REGISTRATION_MAX_REDIRECT_URIS:
        return f"At most {REGISTRATION_MAX_REDIRECT_URIS} redirect_uris may be registered."
    for uri in uris:
        if isinstance(uri, str) and (problem := redirect_uri_problem(uri)) is not None:
            return problem
    return None


class SignInView(LoginView):
    """The sign-in page of the consent flow, for every active user (the admin's takes staff
    only)."""

    template_name = "oauth/sign_in.html"


class ConsentView(AuthorizationView):
    """The authorization endpoint: the signed-in person sees "<client> wants to: …" and
    allows or denies. Refused before they are asked, with the RFC's error sent back to the
    client: a person without the right to connect clients (access_denied), scopes beyond
    their rights (invalid_scope), PKCE other than S256 (invalid_request), a resource that is
    not one of this service's MCP endpoints (invalid_target)."""

    template_name = "oauth/consent.html"

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return _offered(request) or super().dispatch(request, *args, **kwargs)

    def validate_authorization_request(self, request: HttpRequest) -> tuple[list[str], dict]:
        scopes, credentials = super().validate_authorization_request(request)
        resources = request.GET.getlist("resource")
        self._refuse_beyond_rights(
            scopes, credentials.get("code_challenge_method"), resources, credentials
        )
        if not resources:
            credentials["resource"] = [self._main_resource()]
        return scopes, credentials

    def form_valid(self, form: Any) -> HttpResponse:
        data = form.cleaned_data
        application = get_object_or_404(Application, client_id=data["client_id"])
        try:
            self._refuse_beyond_rights(
                (data.get("scope") or "").split(),
                data.get("code_challenge_method"),
                (data.get("resource") or "").split(),
                data,
            )
        except OAuthToolkitError as error:
            return self.error_response(error, application)
        if not data.get("resource"):
            data["resource"] = self._main_resource()
        return super().form_valid(form)

    def _main_resource(self) -> str:
        """What a client that names no resource (the 2025-03-26 spec's clients) gets a token
        for: the main endpoint, never an unrestricted token."""
        return _origin(self.request) + MCP_PATH

    def _refuse_beyond_rights(
        self,
        scopes: list[str],
        challenge_method: str | None,
        resources: list[str],
        credentials: dict[str, Any],
    ) -> None:
        """Raise the error the client is sent back if the request asks for more than this
        person and this service allow (the class's docstring)."""
        user = self.request.user
        problem: tuple[str, str] | None = None
        origin = _origin(self.request)
        if challenge_method != "S256":
            problem = ("invalid_request", "PKCE with code_challenge_method=S256 is required.")
        elif not may_connect_clients(user):
            problem = (
                "access_denied",
                f"The user {user.get_username()} may not connect MCP clients: an operator gives "
                f"that right (the permission {CONNECT_PERMISSION}).",
            )
        elif len(resources) > 1:
            problem = ("invalid_target", "Ask for one resource (one MCP endpoint) per token.")
        elif resources and not _ours(resources[0], origin):
            problem = (
                "invalid_target",
                f"The resource {resources[0][:200]!r} is not an MCP endpoint of this server: "
                f"name {origin}/mcp, {origin}/mcp/<slug> or {origin}/sse.",
            )
        elif (reason := refused_scopes_reason(user, scopes)) is not None:
            problem = ("invalid_scope", reason)
        if problem is not None:
            error, description = problem
            raise OAuthToolkitError(
                error=CustomOAuth2Error(
                    error=error, description=description, state=credentials.get("state")
                ),
                redirect_uri=credentials.get("redirect_uri"),
            )

    # Client ID Metadata Documents (oauth/client_documents.py): the page of a refused URL
    # client_id, or of a redirect_uri its document does not list, says why.
    def error_response(
        self, error: OAuthToolkitError, application: Any, **kwargs: Any
    ) -> HttpResponse:
        explain_document_refusal(error.oauthlib_error)
        response: HttpResponse = super().error_response(error, application, **kwargs)
        return response

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context: dict[str, Any] = super().get_context_data(**kwargs)
        context["scope_words"] = scope_words(context.get("scopes", []))
        return context


def _ours(resource: str, origin: str) -> bool:
    """Whether `resource` names one of this service's MCP endpoints at `origin`."""
    if not is_valid_resource_uri(resource) or not resource.startswith(origin + "/"):
        return False
    return resource_path(resource[len(origin) :]) == resource[len(origin) :]


@login_required
def connections(request: HttpRequest) -> HttpResponse:
    """The clients the signed-in person connected with OAuth, and a button to revoke each."""
    tokens = (
        AccessToken.objects.filter(user=request.user)
        .select_related("application")
        .order_by("application_id", "-created")
    )
    clients: dict[int, dict[str, Any]] = {}
    for access in tokens:
        application = access.application
        if application is None:
            continue
        entry = clients.setdefault(
            application.pk,
            {"application": application, "scopes": set(), "resources": set(), "last": access},
        )
        entry["scopes"].update(access.scope.split())
        entry["resources"].update(access.resource or [])
    rows = [
        {
            "application": entry["application"],
            "scopes": scope_words(entry["scopes"]),
            "resources": sorted(entry["resources"]),
            "last": entry["last"],
        }
        for entry in clients.values()
    ]
    return render(request, "oauth/connections.html", {"rows": rows})


@login_required
@require_POST
def disconnect(request: HttpRequest, application_id: int) -> HttpResponse:
    """Revoke every token and pending code the signed-in person gave the client
    `application_id`: its calls are refused from now on (other processes within seconds)."""
    application = get_object_or_404(Application, pk=application_id)
    user = request.user
    with transaction.atomic():
        scopes = sorted(
            {
                scope
                for line in AccessToken.objects.filter(
                    user=user, application=application
                ).values_list("scope", flat=True)
                for scope in line.split()
            }
        )
        refreshes = RefreshToken.objects.filter(
            user=user, application=application, revoked__isnull=True
        )
        accesses = AccessToken.objects.filter(user=user, application=application)
        held = refreshes.exists() or accesses.exists()
        for refresh in refreshes:
            refresh.revoke()
        for access in accesses:
            access.revoke()
        Grant.objects.filter(user=user, application=application).delete()
        if held:
            audit_client_event(
                user=user, application=application, action=AuditEvent.Action.REVOKED, scopes=scopes
            )
    return redirect("oauth-connections")
