"""Top-level URL routes."""

from django.contrib import admin
from django.http import HttpRequest, HttpResponseRedirect
from django.templatetags.static import static
from django.urls import include, path, re_path
from django.views.generic import RedirectView

from mcp_endpoint.oauth import views as oauth_views
from mcp_endpoint.rest.api import api
from mcp_endpoint.transports import views as mcp_views


def favicon(request: HttpRequest) -> HttpResponseRedirect:
    """Browsers ask for /favicon.ico whatever a page links; send them to the static icon.

    Resolved per request, not at import: in production the name carries the file's hash from
    collectstatic's manifest. Not permanent, so a new hash after a deploy is picked up.
    """
    return HttpResponseRedirect(static("graphs/favicon.svg"))


# Where clients that follow the MCP authorization spec look for OAuth and that the OAuth routes
# above do not serve (OpenID discovery; any other method or suffix): a JSON 404, saying this
# server takes API keys when OAuth is off.
OAUTH_DISCOVERY = (
    r"^(?:\.well-known/(?:oauth-protected-resource|oauth-authorization-server"
    r"|openid-configuration)|register|authorize|token)(?:/.*)?$"
)
# Any other path under the prefixes MCP clients try: a JSON 404, never an HTML page.
MCP_CLIENT_PREFIXES = r"^(?:\.well-known|sse|messages)(?:/.*)?$"

urlpatterns = [
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
    path("favicon.ico", favicon),
    path("admin/", admin.site.urls),
    path("mcp", mcp_views.mcp, name="mcp"),
    # Any path below /mcp/ is a group's endpoint, as under uvicorn (config/asgi.py): an unknown
    # one, /mcp/a/b included, is the endpoint's JSON-RPC 404.
    re_path(r"^mcp/(?P<group>.*)$", mcp_views.mcp, name="mcp-group"),
    path("", include("mcp_endpoint.oauth.urls")),
    path("oauth/sign-in", oauth_views.SignInView.as_view(), name="oauth-sign-in"),
    path("oauth/connections", oauth_views.connections, name="oauth-connections"),
    path(
        "oauth/connections/<int:application_id>/revoke",
        oauth_views.disconnect,
        name="oauth-disconnect",
    ),
    re_path(OAUTH_DISCOVERY, mcp_views.oauth_discovery),
    re_path(MCP_CLIENT_PREFIXES, mcp_views.not_found),
    path("api/v1/", api.urls),
    path("metrics", mcp_views.metrics, name="metrics"),
    path("", include("graphs.urls")),
]
