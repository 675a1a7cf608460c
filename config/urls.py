"""Top-level URL routes."""

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

from mcp_endpoint import views as mcp_views
from mcp_endpoint.api import api

urlpatterns = [
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
    path("admin/", admin.site.urls),
    path("mcp", mcp_views.mcp, name="mcp"),
    path("api/v1/", api.urls),
    path("", include("graphs.urls")),
]
