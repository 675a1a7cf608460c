"""The node spec catalog: specs as authors edit them, and their immutable revisions."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from nodespecs.specformat import (
    NODE_TYPES,
    SpecFormatError,
    dump_spec_document,
    parse_spec_document,
)

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


class NodeSpec(models.Model):
    """One node spec in the unified format, unique per (node_type, subtype)."""

    class Source(models.TextChoices):
        BUILTIN = "builtin", "Built-in"
        CUSTOM = "custom", "Custom"
        PROVIDER = "provider", "Provider"

    node_type = models.CharField(max_length=32, choices=NodeType.choices)
    subtype = models.CharField(max_length=128, help_text="UPPER_SNAKE_CASE, e.g. HTTP_REQUEST.")
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
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["node_type", "subtype"]
        constraints = [
            models.UniqueConstraint(fields=["node_type", "subtype"], name="unique_node_spec")
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


class NodeSpecRevision(models.Model):
    """An immutable snapshot of a spec taken at each save: who, when, and the content."""

    spec = models.ForeignKey(NodeSpec, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    document = models.JSONField()
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    # Kept apart from `author` so the history still says who when the user is deleted.
    author_name = models.CharField(max_length=150, blank=True)
    comment = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["spec", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["spec", "number"], name="unique_spec_revision")
        ]

    def __str__(self) -> str:
        return f"{self.spec} revision {self.number}"
