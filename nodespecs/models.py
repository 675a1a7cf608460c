"""The node spec catalog: specs as authors edit them, and their immutable revisions."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

from nodespecs.downstream import client
from nodespecs.downstream.connection import SSE_READ_TIMEOUT_DEFAULT
from nodespecs.knowledge.specformat import (
    NODE_TYPES,
    SpecFormatError,
    dump_spec_document,
    parse_spec_document,
)
from nodespecs.secrets import EncryptedJSONField, SecretsUnreadable

# The fields of a spec document, in the order the admin shows them.
DOCUMENT_FIELDS: tuple[str, ...] = (
    "node_type",
    "subtype",
    "version",
    "display_name",
    "description",
    "aliases",
    "configurations",
    "input_params",
    "output_params",
    "input_ports",
    "output_ports",
    "tags",
    "attached_nodes",
    "examples",
)


class NodeType(models.TextChoices):
    TRIGGER = "TRIGGER", "Trigger"
    AI_AGENT = "AI_AGENT", "AI agent"
    ACTION = "ACTION", "Action"
    EXTERNAL_ACTION = "EXTERNAL_ACTION", "External action"
    FLOW = "FLOW", "Flow"
    HUMAN_IN_THE_LOOP = "HUMAN_IN_THE_LOOP", "Human in the loop"
    TOOL = "TOOL", "Tool"
    MEMORY = "MEMORY", "Memory"


assert tuple(NodeType.values) == NODE_TYPES


# Provider names become part of node names (mcp-{provider}-{tool}) that agents type.
PROVIDER_NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]*$"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def _check_string_map(value: Any, field: str, pattern: re.Pattern[str], kind: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{field} must be a mapping of names to values, like {{}} for none."]
    problems = [
        f"{name!r} is not a valid {kind} name." for name in value if not pattern.match(name)
    ]
    problems += [
        f"The value of {name!r} must be text, not {type(item).__name__}."
        for name, item in value.items()
        if not isinstance(item, str)
    ]
    return problems


class Provider(models.Model):
    """An external MCP server whose tools become TOOL node specs (see
    `nodespecs.providers.lifecycle`).

    `env` and `headers` may hold secrets (API tokens): they are stored encrypted
    (`nodespecs.secrets`) and the admin never shows their values.
    """

    class Transport(models.TextChoices):
        STDIO = "stdio", "stdio (a command Switchyard starts)"
        STREAMABLE_HTTP = "streamable_http", "Streamable HTTP (a URL)"
        SSE = "sse", "SSE (a URL; the older HTTP transport)"

    class RefreshState(models.TextChoices):
        """Where the refresh of its tools stands; blank until one has run."""

        REFRESHING = "refreshing", "refreshing…"
        REFRESHED = "refreshed", "refreshed"
        FAILED = "failed", "failed"

    name = models.CharField(
        max_length=40,
        unique=True,
        validators=[
            RegexValidator(
                PROVIDER_NAME_PATTERN,
                "Use lower-case letters, digits, - and _, starting with a letter or digit.",
            )
        ],
        help_text="Part of its tools' node names: mcp-NAME-tool. Lower-case, digits, - and _.",
    )
    title = models.CharField(max_length=200, blank=True)
    transport = models.CharField(max_length=16, choices=Transport.choices, default=Transport.STDIO)
    command = models.CharField(max_length=500, blank=True, help_text="stdio: the program.")
    args = models.JSONField(default=list, blank=True, help_text="stdio: its arguments.")
    env = EncryptedJSONField(
        default=dict, blank=True, help_text="stdio: environment variables (secret)."
    )
    cwd = models.CharField(
        max_length=500, blank=True, help_text="stdio: working directory (default: Switchyard's)."
    )
    url = models.CharField(max_length=2000, blank=True, help_text="HTTP: the MCP endpoint URL.")
    headers = EncryptedJSONField(
        default=dict, blank=True, help_text="HTTP: request headers (secret), e.g. Authorization."
    )
    timeout_seconds = models.FloatField(
        default=30.0,
        validators=[MinValueValidator(0.1), MaxValueValidator(3600)],
        help_text="How long a call (and starting the server) may take.",
    )
    sse_read_timeout = models.FloatField(
        "SSE read timeout",
        default=SSE_READ_TIMEOUT_DEFAULT,
        validators=[MinValueValidator(1), MaxValueValidator(3600)],
        help_text="HTTP and SSE: how many seconds to wait for the server's next event (or the "
        "next part of an answer) before giving up the connection; 1 to 3600, default 300 as "
        "in the MCP SDK.",
    )
    enabled = models.BooleanField(default=True)
    # Who may use it in a draft through the API (nodespecs/providers/builder_access.py): keys with
    # workflows:admin always; other builders only where an operator opened it to them.
    open_to_builders = models.BooleanField(
        "open to any builder",
        default=False,
        help_text="Any API key that builds workflows may call this provider's tools (with its "
        "stored headers and env). Off: operators only, and the builders listed below.",
    )
    builders = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="+",
        help_text="Users whose API keys may call this provider's tools in their drafts.",
    )
    # A server an API caller named in a workflow's mcpServers: it belongs to that caller's
    # workflows, is not in the catalog, is never refreshed, and is reached only where the
    # egress policy allows (nodespecs/downstream/egress.py).
    declared_by = models.CharField(
        max_length=150,
        blank=True,
        editable=False,
        help_text="The API key (key:<prefix>) whose workflow declared this server; empty for "
        "providers an operator registered.",
    )
    declared_for = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        editable=False,
        help_text="The user that key acts for.",
    )
    last_refreshed_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_error = models.TextField(blank=True, editable=False)
    # Where the refresh of its tools stands (nodespecs/providers/refreshing.py): a save starts
    # one in the background, so the page says whether it is still running, and since when.
    tools_refresh_state = models.CharField(
        max_length=16, choices=RefreshState.choices, blank=True, editable=False
    )
    tools_refresh_at = models.DateTimeField(
        null=True, blank=True, editable=False, help_text="When the refresh state last changed."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """Check that the settings can reach a server; errors are keyed by field."""
        errors: dict[str, list[str]] = {}
        if self.transport == self.Transport.STDIO:
            if not self.command.strip():
                errors["command"] = ["A stdio provider needs the command that starts it."]
        else:
            parts = urlsplit(self.url)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                errors["url"] = [
                    "An HTTP provider needs an http:// or https:// URL, such as "
                    "https://example.com/mcp."
                ]
        if not isinstance(self.args, list) or not all(isinstance(a, str) for a in self.args):
            errors["args"] = ['args must be a list of strings, like ["--port", "8080"].']
        for field, pattern, kind in (
            ("env", _ENV_NAME, "environment variable"),
            ("headers", _HEADER_NAME, "header"),
        ):
            problems = _check_string_map(getattr(self, field), field, pattern, kind)
            if problems:
                errors[field] = problems
        if errors:
            raise ValidationError(errors)

    def connection(self) -> client.Connection:
        """The pooled-connection settings of this provider.

        Raises `client.DownstreamError` when its secrets cannot be decrypted, so a refresh
        or a run fails like any other unreachable server, with the reason.
        """
        try:
            env, headers = tuple(sorted(self.env.items())), tuple(sorted(self.headers.items()))
        except SecretsUnreadable as exc:
            raise client.DownstreamError(str(exc)) from None
        return client.Connection(
            name=self.name,
            transport=self.transport,
            command=self.command,
            args=tuple(self.args),
            env=env,
            cwd=self.cwd,
            url=self.url,
            headers=headers,
            timeout_seconds=self.timeout_seconds,
            egress_checked=bool(self.declared_by),
            sse_read_timeout=self.sse_read_timeout,
        )


class NodeSpec(models.Model):
    """One node spec in the unified format, unique per (node_type, subtype)."""

    class Source(models.TextChoices):
        BUILTIN = "builtin", "Built-in"
        CUSTOM = "custom", "Custom"
        PROVIDER = "provider", "Provider"

    node_type = models.CharField(max_length=32, choices=NodeType.choices)
    # Long enough for a provider tool's subtype: MCP_ + provider (40) + _ + tool (128).
    subtype = models.CharField(max_length=200, help_text="UPPER_SNAKE_CASE, e.g. HTTP_REQUEST.")
    version = models.CharField(max_length=32, default="1.0.0")
    display_name = models.CharField(max_length=200, blank=True)
    description = models.TextField(help_text="What the node does and when an agent should use it.")
    aliases = models.JSONField(
        default=list, blank=True, help_text="Older subtype names that resolve to this spec."
    )
    configurations = models.JSONField(default=dict, blank=True)
    input_params = models.JSONField(default=dict, blank=True)
    output_params = models.JSONField(default=dict, blank=True)
    input_ports = models.JSONField(default=list, blank=True)
    output_ports = models.JSONField(default=list, blank=True)
    tags = models.JSONField(default=list, blank=True)
    attached_nodes = models.JSONField(default=list, blank=True)
    examples = models.JSONField(default=list, blank=True)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.CUSTOM)
    # Digest of the built-in catalog entry this spec was last loaded from; a spec whose
    # content no longer matches it was edited locally and the loader leaves it alone.
    builtin_digest = models.CharField(max_length=64, blank=True, editable=False)
    # A provider's tool: deleting the provider deletes its specs, since nothing could call
    # them any more and agents should not be offered nodes that can never run.
    provider = models.ForeignKey(
        Provider, null=True, blank=True, on_delete=models.CASCADE, related_name="specs"
    )
    provider_tool = models.CharField(
        max_length=200, blank=True, help_text="The tool's name on its provider's server."
    )
    available = models.BooleanField(
        default=True, help_text="False when the provider no longer offers this tool."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["node_type", "subtype"]
        constraints = [
            models.UniqueConstraint(fields=["node_type", "subtype"], name="unique_node_spec"),
            models.UniqueConstraint(
                fields=["provider", "provider_tool"],
                condition=models.Q(provider__isnull=False),
                name="unique_provider_tool",
            ),
        ]
        verbose_name = "node spec"

    def __str__(self) -> str:
        return f"{self.node_type}/{self.subtype}"

    def document(self) -> dict[str, Any]:
        """The spec's content as a plain document (what YAML export and revisions hold)."""
        return {name: getattr(self, name) for name in DOCUMENT_FIELDS}

    def set_document(self, document: dict[str, Any]) -> None:
        """Overwrite the spec's content from a validated document."""
        for name in DOCUMENT_FIELDS:
            setattr(self, name, document[name])

    def clean(self) -> None:
        """Validate the content with the spec format; errors are keyed by model field."""
        try:
            parsed = parse_spec_document(self.document())
        except SpecFormatError as exc:
            errors: dict[str, list[str]] = {}
            for path, message in exc.problems.items():
                field, _, rest = path.partition(".")
                if field not in DOCUMENT_FIELDS:
                    field = "__all__"
                errors.setdefault(field, []).append(f"{rest}: {message}" if rest else message)
            raise ValidationError(errors) from None
        # Store the normalised form (lower-cased tags, legacy fields rewritten).
        self.set_document(dump_spec_document(parsed))


class Revision(models.Model):
    """An immutable, numbered snapshot of something authors edit: who saved it, when, why.
    Subclasses add what is kept and whose revision it is."""

    number = models.PositiveIntegerField()
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    # Kept apart from `author` so the history still says who when the user is deleted.
    author_name = models.CharField(max_length=150, blank=True)
    comment = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True

    @staticmethod
    def authored(author: AbstractBaseUser | None, comment: str, actor: str = "") -> dict[str, Any]:
        """The fields that say who saved a revision and why, for `create()`: a user, or else
        `actor` (an API key's `key:<prefix>`)."""
        return {
            "author": author if author is not None and author.pk else None,
            "author_name": author.get_username() if author is not None else actor[:150],
            "comment": comment[:300],
        }

    @staticmethod
    def next_number(revisions: models.QuerySet[Any] | models.Manager[Any]) -> int:
        """The number the next of these revisions takes."""
        last = revisions.order_by("-number").values_list("number", flat=True).first()
        return (last or 0) + 1


class NodeSpecRevision(Revision):
    """An immutable snapshot of a spec taken at each save: who, when, and the content."""

    spec = models.ForeignKey(NodeSpec, on_delete=models.CASCADE, related_name="revisions")
    document = models.JSONField()

    class Meta:
        ordering = ["spec", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["spec", "number"], name="unique_spec_revision")
        ]

    def __str__(self) -> str:
        return f"{self.spec} revision {self.number}"


class AuditEvent(models.Model):
    """Who changed which spec, workflow, provider or API key, and when. Written once by
    `nodespecs.audit.audit_record`, never edited; the label and id survive the object's
    deletion. Holds field names only, never values, so no secret lands here."""

    class Action(models.TextChoices):
        CREATED = "created", "created"
        CHANGED = "changed", "changed"
        DELETED = "deleted", "deleted"
        REVOKED = "revoked", "revoked"
        RESTORED = "restored", "restored a revision"
        REFRESHED = "refreshed", "refreshed its tools"
        REENCRYPTED = "re-encrypted", "re-encrypted its secrets"
        DECIDED = "decided", "decided a run waiting for approval"
        FORCED = "force-published", "published a version that changes an example's result"
        GRANTED = "granted", "granted an OAuth client access"
        RENEWED = "renewed", "renewed an OAuth client's access (refresh token used)"

    # A username, "command:<name>" for a management command, or "api-key:<prefix>".
    actor = models.CharField(max_length=150)
    action = models.CharField(max_length=16, choices=Action.choices)
    # The model's label, e.g. "nodespecs.provider".
    object_type = models.CharField(max_length=100)
    object_id = models.CharField(max_length=64)
    object_label = models.CharField(max_length=200)
    fields = models.JSONField(default=list, blank=True, help_text="Names of the changed fields.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["-created_at", "-id"], name="audit_latest"),
            models.Index(fields=["object_type", "object_id", "-created_at"], name="audit_object"),
        ]
        verbose_name = "audit event"
        # Events are written by code only: nobody may be given add, change or delete.
        default_permissions = ("view",)

    def __str__(self) -> str:
        return f"{self.actor} {self.action} {self.object_type} {self.object_label}"
