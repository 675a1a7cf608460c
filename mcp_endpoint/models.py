"""API keys: how MCP and REST clients authenticate, and what they may do."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import models
from django.utils import timezone


class Scope(models.TextChoices):
    TOOLS_READ = "tools:read", "List tools, prompts and completions"
    TOOLS_EXECUTE = "tools:execute", "Call tools"
    RESOURCES_READ = "resources:read", "List and read resources"
    RUNS_READ = "runs:read", "Read every workflow run and its node executions"
    RUNS_DECIDE = (
        "runs:decide",
        "Approve or reject runs waiting at an approval node, and annotate runs",
    )
    WORKFLOWS_WRITE = "workflows:write", "Create and change drafts of workflows, and test them"
    WORKFLOWS_PUBLISH = "workflows:publish", "Publish a version of a workflow (serve it as a tool)"
    WORKFLOWS_ADMIN = (
        "workflows:admin",
        "Change and publish every group's workflows and use every provider (operators' tools)",
    )
    HEALTH_CHECK = "health:check", "Read the health endpoint"
    METRICS_READ = "metrics:read", "Scrape the Prometheus metrics at /metrics"


class ApiKey(models.Model):
    """A client credential. Only a hash of the secret is stored; the key is shown once."""

    name = models.CharField(max_length=100, help_text="Who or what uses this key.")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    # The public part of the key, shown in lists and logs so a key can be recognised.
    prefix = models.CharField(max_length=16, unique=True, editable=False)
    secret_hash = models.CharField(max_length=64, editable=False)
    scopes = models.JSONField(default=list)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)
    rate_limit_per_minute = models.PositiveIntegerField(
        null=True, blank=True, help_text="Requests per minute; empty uses MCP_RATE_LIMIT."
    )
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"
        # Connecting an MCP client with OAuth gives it what an API key gives, so the right to
        # do so sits beside the keys (mcp_endpoint/access/oauth_scopes.py).
        permissions = [("connect_oauth_clients", "Can connect MCP clients with OAuth")]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    def is_expired(self, now: datetime | None = None) -> bool:
        return self.expires_at is not None and self.expires_at <= (now or timezone.now())
