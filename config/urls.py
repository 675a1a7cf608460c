"""Top-level URL routes."""

from django.contrib import admin
from django.http import HttpRequest, HttpResponseRedirect
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from mcp_endpoint.rest.api import api
from mcp_endpoint.transports import views as mcp_views


def favicon(request: HttpRequest) -> HttpResponseRedirect:
    """Browsers ask for /favicon.ico whatever a page links; send them to the static icon.

    Resolved per request, not at import: in production the name carries the file's hash from
    collectstatic's manifest. Not permanent, so a new hash after a deploy is picked up.
    """
    return HttpResponseRedirect(static("graphs/favicon.svg"))


urlpatterns = [
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
    path("favicon.ico", favicon),
    path("admin/", admin.site.urls),
    path("mcp", mcp_views.mcp, name="mcp"),
    path("mcp/<str:group>", mcp_views.mcp, name="mcp-group"),
    path("api/v1/", api.urls),
    path("metrics", mcp_views.metrics, name="metrics"),
    path("", include("graphs.urls")),
]
