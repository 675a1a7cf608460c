"""The OAuth routes, at the paths MCP clients look for (the 2025-03-26 spec's defaults among
them). Named in django-oauth-toolkit's namespace, whose metadata view reverses them."""

from django.urls import path, re_path

from mcp_endpoint.oauth import views

app_name = "oauth2_provider"

urlpatterns = [
    re_path(
        r"^\.well-known/oauth-protected-resource(?:/(?P<suffix>.*))?$",
        views.protected_resource,
        name="oauth-resource-metadata",
    ),
    # The issuer is the origin, with no path: a suffixed form names no issuer here and is
    # the JSON 404 of config/urls.py (the toolkit's view would make one up from the suffix).
    path(
        ".well-known/oauth-authorization-server",
        views.server_metadata,
        name="oauth-server-metadata",
    ),
    path("authorize", views.ConsentView.as_view(), name="authorize"),
    path("token", views.token, name="token"),
    path("revoke", views.revoke, name="revoke-token"),
    path("register", views.register, name="dcr-register"),
    # RFC 7592: a registered client reads, changes or deletes its registration here, with
    # the registration token it was given.
    path("register/<str:client_id>", views.registration, name="dcr-register-management"),
]
