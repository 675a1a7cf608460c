"""validate_workflow: a definition checked against this server's providers, rights, limits
and the workflow it would replace, as problems an agent can read and fix.

The checking itself is the engine's (graphs/engine/checks/all_checks.py); this module gives it what
only the database and settings know:

- the servers an `mcp` node may call: each `mcpServers` entry that is a registered provider
  (the one named as the registry shows it, secrets masked, or one with exactly its settings, as
  import binds them), and registered providers by name, which a draft may name without declaring
  them (graphs/authoring/drafts.py declares them); a provider's tools are its TOOL node specs, with
  the tool's inputSchema and outputSchema on their ports (nodespecs/providers/tool_specs.py). An
  entry that is not a registered provider has no known tools: finding them out would mean starting
  or calling it, which validation never does;
- the caller's rights: a stdio server that is not a registered provider may be added only
  by a caller who may start processes, and only with a command PROVIDER_ALLOWED_COMMANDS
  allows (the rule of graphs.authoring.services.workflow_providers, checked here without registering
  anything);
- the egress policy (nodespecs/downstream/egress.py): an HTTP or SSE server that no operator
registered,
  named by a caller who may not start processes, whose host resolves to an address the
  policy refuses (the DNS lookups bounded by a short timeout);
- the limit ceilings, and the ceiling on an approval node's timeoutMs
  (graphs/execution/limits.py);
- with `name`, the published version of that workflow, whose callers a change may break.

Nothing is written, and nothing a caller sends makes it raise: text that cannot be read is
one `error` problem saying why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# The very rules import binds servers by (private there: they are its implementation), so
# that what validation calls a registered provider is what an import will bind.
from graphs.authoring.files import registered_as, server_connection
from graphs.authoring.patching import definition_too_large
from graphs.engine import DefinitionError, load_yaml
from graphs.engine.checks.all_checks import (
    MAX_ITEMS,
    MAX_NODES,
    LimitCeiling,
    ToolSchema,
    offered_fields,
    validate_document,
)
from graphs.engine.checks.problems import Problem, error, warning
from graphs.engine.format.loading import Counted, DefinitionTooLarge
from graphs.engine.format.servers import parse_server, too_many_servers
from graphs.execution.limits import (
    APPROVAL_TIMEOUT_SETTING,
    CEILINGS,
    approval_timeout_ceiling,
    limit_ceilings,
)
from graphs.models import Workflow
from nodespecs.callers import Caller
from nodespecs.downstream.egress import url_refusals
from nodespecs.downstream.process_rights import command_refusal, stdio_refusal
from nodespecs.models import NodeSpec, NodeType, Provider
from nodespecs.providers.builder_access import (
    declares_servers,
    provider_refusal,
    usable_provider_names,
)
from nodespecs.providers.lifecycle import provider_reused
from nodespecs.providers.tool_specs import port_schema

#: The largest definition read, as YAML or JSON text, in bytes (what an import reads).
MAX_DEFINITION_BYTES = 1_000_000
# What text may hold, counted as it is read: what validation reads of a document.
_COUNTED = Counted(values=MAX_ITEMS, nodes=MAX_NODES)


@dataclass(frozen=True)
class ValidationReport:
    """The answer of validate_workflow: valid when no problem is an error."""

    problems: list[Problem] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        """True when no problem is an error (warnings do not stop a draft)."""
        return not any(problem.severity == "error" for problem in self.problems)

    def as_dict(self) -> dict[str, Any]:
        """The structured content of validate_workflow's answer."""
        return {"valid": self.valid, "problems": [p.as_dict() for p in self.problems]}


def validate_workflow(
    definition: str | dict[str, Any], *, caller: Caller, name: str | None = None
) -> ValidationReport:
    """Check ``definition`` (YAML text, or a document already read; either file form) for
    ``caller``; with ``name``, also against the published version of that workflow."""
    document = read_definition(definition)
    if isinstance(document, Problem):
        return ValidationReport([document])
    return _report(document, _ServerIndex(document, caller), name)


def validate_with_offered(
    document: dict[str, Any], node_id: str | None, *, caller: Caller, name: str | None = None
) -> tuple[ValidationReport, list[dict[str, str]]]:
    """``validate_workflow`` of a document already read, and what the expressions of node
    ``node_id`` can read there (graphs/engine/checks/offered.py): the canvas editor asks
    both as its author works, the servers resolved once for the two."""
    servers = _ServerIndex(document, caller)
    report = _report(document, servers, name)
    if node_id is None:
        return report, []
    offered = offered_fields(
        document, node_id, tools_of=servers.tools_of, registered_servers=servers.registered
    )
    return report, [value.as_dict() for value in offered]


def _report(document: dict[str, Any], servers: _ServerIndex, name: str | None) -> ValidationReport:
    previous, problems = _previous(name)
    problems += servers.refused
    highest = limit_ceilings()
    problems += validate_document(
        document,
        tools_of=servers.tools_of,
        registered_servers=servers.registered,
        ceilings=[LimitCeiling(c.key, getattr(highest, c.field), c.setting) for c in CEILINGS],
        approval_timeout_ceiling=LimitCeiling(
            "timeoutMs", approval_timeout_ceiling(), APPROVAL_TIMEOUT_SETTING
        ),
        previous=previous,
    )
    problems.sort(key=lambda problem: problem.severity != "error")  # stable: errors first
    return ValidationReport(problems)


def read_definition(definition: Any) -> dict[str, Any] | Problem:
    """The definition (YAML or JSON text, or a document already read) as a document, or the
    one problem that stops it being read: too large, unreadable, tags or alias bombs, not a
    mapping."""
    if isinstance(definition, str):
        size = len(definition.encode("utf-8", "replace"))
        if size > MAX_DEFINITION_BYTES:
            return error(
                "definition_too_large",
                f"the definition is {size:,} bytes, over the limit of {MAX_DEFINITION_BYTES:,}; "
                "split its tools into several definitions",
                (),
            )
        try:
            definition = load_yaml(definition, max_bytes=MAX_DEFINITION_BYTES, counted=_COUNTED)
        except DefinitionTooLarge as exc:  # counted as read, before anything was built
            return error("definition_too_large", str(exc), ())
        except DefinitionError as exc:  # malformed, tags, alias bombs, too deep
            return error(
                "yaml_unreadable",
                f"the definition cannot be read: {exc} (send YAML or JSON text without tags, "
                "or a JSON object)",
                (),
            )
    if not isinstance(definition, dict):
        return error(
            "not_a_mapping",
            "the definition must be a graph document: a mapping with version, server and "
            f"tools (as YAML text or a JSON object); got {type(definition).__name__}",
            (),
        )
    too_large = definition_too_large(definition)  # counted before any deep work reads it
    if too_large is not None:
        return error("definition_too_large", too_large, ())
    return definition


class _ServerIndex:
    """The servers a definition may call, resolved once against the registry."""

    def __init__(self, document: Mapping[str, Any], caller: Caller) -> None:
        # Only the providers this caller may use (nodespecs/providers/builder_access.py): another is
        # as unknown to its nodes as a server nobody registered.
        self.registered = usable_provider_names(caller)
        self.refused: list[Problem] = []
        self._bound: dict[str, Provider] = {}
        self._tools: dict[int, dict[str, ToolSchema] | None] = {}
        section = document.get("mcpServers")
        if not isinstance(section, Mapping) or too_many_servers(section) is not None:
            section = {}  # the engine's checks say why; nothing is looked up for it
        # A declared server is the provider import binds it to, or none: never another
        # provider that happens to have its name (import would register a new one).
        self._declared = {str(name) for name in section}
        # Servers the egress policy judges (nodespecs/downstream/egress.py): an HTTP/SSE server an
        # API caller declares (nodespecs/providers/builder_access.py), as its connections will be.
        checked_urls: dict[str, str] = {}
        for name, settings in section.items():
            config = parse_server(str(name), settings, [])
            if config is None:
                continue  # the engine reports why
            by_name = registered_as(config)
            if by_name is not None:  # as import: shown entries name their provider
                self._bind(config.name, by_name, caller)
                continue
            connection = server_connection(config, None)
            found = provider_reused(connection, caller)
            if found is not None:
                self._bind(config.name, found, caller)
            if connection.transport == Provider.Transport.STDIO:
                self._check_rights(config.name, connection.command, connection.env, found, caller)
            elif declares_servers(caller):  # found, if any, is its own declared server
                checked_urls[config.name] = connection.url
        for name, refusal in url_refusals(checked_urls).items():
            message = f"server {name!r}: refused by the egress policy: {refusal.reason}"
            at = ("mcpServers", name, "url")
            self.refused.append(error("server_address_refused", message, at))

    def _bind(self, name: str, provider: Provider, caller: Caller) -> None:
        """Bind server `name` to `provider`, or refuse it when `caller` may not use it."""
        refusal = provider_refusal(provider, caller, name)
        if refusal is None:
            self._bound[name] = provider
        else:
            self.refused.append(error("provider_not_allowed", refusal, ("mcpServers", name)))

    def _check_rights(
        self,
        name: str,
        command: str,
        env: tuple[tuple[str, str], ...],
        found: Provider | None,
        caller: Caller,
    ) -> None:
        at = ("mcpServers", name)
        refusal = command_refusal(command, [key for key, _ in env])
        if refusal is not None:
            self.refused.append(error("command_not_allowed", f"server {name!r}: {refusal}", at))
        elif not caller.may_start_processes and found is None:
            message = stdio_refusal(server=name, command=command) + (
                " A registered provider is used when its command, args, env and working "
                "directory are exactly those of the server."
            )
            self.refused.append(error("stdio_not_allowed", message, at))

    def _provider(self, name: str) -> Provider | None:
        if name in self._bound:
            return self._bound[name]
        if name in self.registered and name not in self._declared:
            self._bound[name] = Provider.objects.get(name=name)
            return self._bound[name]
        return None

    def tools_of(self, name: str) -> dict[str, ToolSchema] | None:
        """The tools of the server a node names: its provider's TOOL specs; None when it is
        no registered provider, or one without specs (never refreshed)."""
        provider = self._provider(name)
        if provider is None:
            return None
        if provider.pk not in self._tools:
            specs = NodeSpec.objects.filter(provider=provider, node_type=NodeType.TOOL)
            rows = list(
                specs.values_list("provider_tool", "available", "input_ports", "output_ports")
            )
            self._tools[provider.pk] = (
                {
                    tool: ToolSchema(port_schema(inputs), port_schema(outputs))
                    for tool, available, inputs, outputs in rows
                    if available
                }
                if rows
                else None
            )
        return self._tools[provider.pk]


def _previous(name: str | None) -> tuple[dict[str, ToolSchema] | None, list[Problem]]:
    """The schemas of the published version of workflow ``name``, to compare a change with."""
    if name is None:
        return None, []
    workflow = Workflow.objects.select_related("current_version").filter(name=name).first()
    if workflow is None:
        return None, [
            warning(
                "workflow_not_found",
                f"no workflow is named {name!r}, so the definition is not compared with one; "
                "leave `name` out for a new workflow, or give an existing workflow's name",
                (),
            )
        ]
    version = workflow.current_version
    if version is None:
        return None, []  # never published: no caller to break
    definition = version.definition
    return {name: ToolSchema(definition.get("inputSchema"), definition.get("outputSchema"))}, []
