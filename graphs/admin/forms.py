"""The forms of the workflow admin: the YAML editor of a workflow's graph (`WorkflowForm`,
shown by `editor_text`, checked by `workflow_check` as it is saved) and the sample
arguments and breakpoints of a test run (`TestRunForm`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.db import models

from graphs.authoring.services import workflow_check
from graphs.engine import DefinitionError, dump_yaml, load_yaml
from graphs.execution.resuming.breakpoints import MAX_BREAKPOINTS
from graphs.models import Workflow
from nodespecs.models import Provider

# The keys of the YAML editor, each mapped to the model field it edits.
EDITOR_FIELDS = {
    "description": "description",
    "inputSchema": "input_schema",
    "outputSchema": "output_schema",
    "executionLimits": "limits",
    "servers": "servers",
    "nodes": "nodes",
}
FIELD_KEYS = {field: key for key, field in EDITOR_FIELDS.items()}


def editor_text(workflow: Workflow) -> str:
    """The workflow as the editor shows it; servers by provider name, not id. Generated from
    the stored JSON each time (multi-line strings as `|` blocks): saving it unchanged stores
    the same definition."""
    names = dict(
        Provider.objects.filter(pk__in=workflow.servers.values()).values_list("pk", "name")
    )
    document = {
        "description": workflow.description,
        "inputSchema": workflow.input_schema,
        "outputSchema": workflow.output_schema,
        "executionLimits": workflow.limits,
        "servers": {
            server: names.get(pk, f"<missing provider {pk}>")
            for server, pk in workflow.servers.items()
        },
        "nodes": workflow.nodes,
    }
    return dump_yaml(document)


class WorkflowForm(forms.ModelForm):
    graph = forms.CharField(
        label="Graph (YAML)",
        widget=forms.Textarea(
            attrs={"rows": 30, "cols": 110, "class": "vLargeTextField", "spellcheck": "false"}
        ),
        help_text=(
            "description, inputSchema, outputSchema, executionLimits, servers (server name → "
            "provider name) and nodes, in the graph file format (docs/graphs.md)."
        ),
    )

    class Meta:
        model = Workflow
        fields = ["name", "group", "enabled", "retry_on_worker_loss"]

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        if self.instance.pk and not self.is_bound:
            self.initial["graph"] = editor_text(self.instance)
        # Tall enough for the whole graph up to a point, shown again with its errors too:
        # scrolling inside a box within the page hides the part being edited.
        text = self.data.get("graph", "") if self.is_bound else self.initial.get("graph", "")
        lines = str(text).count("\n") + 2
        self.fields["graph"].widget.attrs["rows"] = min(max(lines, 30), 80)

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        try:
            document = load_yaml(cleaned.get("graph", ""))
        except DefinitionError as exc:
            raise ValidationError({"graph": exc.problems}) from None
        if not isinstance(document, dict):
            raise ValidationError({"graph": "The graph must be a YAML mapping with nodes."})
        unknown = sorted(set(document) - set(EDITOR_FIELDS))
        if unknown:
            raise ValidationError(
                {"graph": f"Unknown key {', '.join(unknown)}; use {', '.join(EDITOR_FIELDS)}."}
            )
        workflow = self.instance
        for key, field in EDITOR_FIELDS.items():
            model_field = Workflow._meta.get_field(field)
            assert isinstance(model_field, models.Field)  # each a field of its own, no relation
            setattr(workflow, field, document.get(key, model_field.get_default()))
        workflow.description = workflow.description or ""
        workflow.servers = self._servers(document.get("servers") or {})
        workflow.name = cleaned.get("name", workflow.name)
        try:
            workflow_check(workflow)
        except ValidationError as exc:
            raise ValidationError(
                {
                    "graph" if key in FIELD_KEYS else key: [
                        f"{FIELD_KEYS.get(key, key)}: {m}" for m in messages_
                    ]
                    for key, messages_ in exc.message_dict.items()
                }
            ) from None
        return cleaned

    def _servers(self, raw: Any) -> dict[str, int]:
        if not isinstance(raw, dict):
            raise ValidationError({"graph": "servers must map server names to provider names."})
        providers = dict(
            Provider.objects.filter(name__in=[str(v) for v in raw.values()]).values_list(
                "name", "pk"
            )
        )
        missing = sorted(
            f"{server} → {name}" for server, name in raw.items() if str(name) not in providers
        )
        if missing:
            raise ValidationError(
                {
                    "graph": f"servers: no provider named {', '.join(missing)}; register it "
                    "under Providers first."
                }
            )
        return {str(server): providers[str(name)] for server, name in raw.items()}


class TestRunForm(forms.Form):
    arguments = forms.JSONField(
        initial=dict,
        widget=forms.Textarea(attrs={"rows": 8, "cols": 80}),
        help_text="Sample arguments as a JSON object, checked against the input schema.",
    )
    breakpoints = forms.CharField(
        required=False,
        max_length=MAX_BREAKPOINTS * 130,
        widget=forms.TextInput(attrs={"size": 80, "placeholder": "e.g. double, answer"}),
        help_text=(
            "Node ids to pause before, separated by commas (optional). The run stops before "
            "each; continue, step or stop it on its history page."
        ),
    )

    def __init__(self, *args: Any, node_ids: Sequence[str] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.node_ids = list(node_ids)

    def clean_breakpoints(self) -> tuple[str, ...]:
        """The node ids, each once, in the order given; each one a node of the version."""
        named = [part.strip() for part in self.cleaned_data["breakpoints"].split(",")]
        chosen = tuple(dict.fromkeys(name for name in named if name))
        unknown = [name for name in chosen if name not in self.node_ids]
        if unknown:
            raise ValidationError(
                f"The current version has no node {', '.join(map(repr, unknown))}: its nodes "
                f"are {', '.join(self.node_ids)}."
            )
        if len(chosen) > MAX_BREAKPOINTS:
            raise ValidationError(
                f"{len(chosen)} breakpoints: a test run takes at most {MAX_BREAKPOINTS}."
            )
        return chosen
