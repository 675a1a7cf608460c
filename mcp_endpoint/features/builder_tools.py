"""The tools with which an agent builds a workflow: validate a definition, store it as a
draft, change it, read its versions and publish one (graphs/authoring/drafts.py,
graphs/authoring/validation.py).

The loop they make, as the server's instructions tell a client's model: search_nodes and
get_node_details, then validate_workflow until it is valid, create_workflow (a draft, not
served), test_workflow, publish_workflow; update_workflow for each change after.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar, cast

from pydantic import Field

from graphs.authoring import drafts, examples
from graphs.authoring.patching import MAX_PATCH_OPERATIONS
from graphs.authoring.validation import MAX_DEFINITION_BYTES, validate_workflow
from graphs.execution import mocks as run_mocks
from graphs.execution.resuming.breakpoints import (
    MAX_BREAKPOINTS,
    PauseError,
    breakpoints_checked,
    pause_end,
    test_run_version,
)
from graphs.execution.toolset import WorkflowTool
from graphs.models import WorkflowVersion
from mcp_endpoint.access.keys import with_same_owner_actors
from mcp_endpoint.features.tool_definitions import (
    StartRun,
    StrictArguments,
    ToolDefinition,
    ToolError,
)
from nodespecs.callers import Caller

# A definition as YAML or JSON text, whose size the schema advertises (the drafts refuse a
# larger one by its size, naming the limit), or as a JSON object: the inputSchema says both.
_DefinitionText = Annotated[str, Field(json_schema_extra={"maxLength": MAX_DEFINITION_BYTES})]
_DEFINITION = Field(
    description=(
        "A graph in the YAML format of mcpGraph (server, executionLimits, mcpServers, tools "
        "with nodes; either file form), as YAML text or as a JSON object."
    ),
)
_NAME = Field(description="The workflow's name (its tool name).", max_length=128)
_COMMENT = Field(default="", description="Why: kept with the version.", max_length=300)

_PROBLEM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "severity": {"enum": ["error", "warning"]},
        "code": {"type": "string"},
        "node": {"type": ["string", "null"]},
        "path": {"type": "string", "description": "JSON Pointer into the definition sent."},
        "message": {"type": "string"},
        "fix": {"type": "array", "description": "A JSON Patch that removes the problem."},
    },
    "required": ["severity", "code", "node", "path", "message"],
}
_SAVED: dict[str, Any] = {
    "type": "object",
    "properties": {
        "workflow": {"type": "string"},
        "version": {"type": "integer"},
        "status": {"type": "string"},
        "created": {"type": "boolean"},
    },
    "required": ["workflow", "version", "status"],
}
_VERSION_FIELDS: dict[str, Any] = {
    "version": {"type": "integer"},
    "status": {"enum": ["draft", "published", "retired"]},
    "author": {"type": "string"},
    "comment": {"type": "string"},
    "created_at": {"type": "string"},
    "published_at": {"type": ["string", "null"]},
}


class ValidateWorkflowArguments(StrictArguments):
    definition: _DefinitionText | dict[str, Any] = _DEFINITION
    name: str | None = Field(
        default=None,
        description="An existing workflow this definition would replace: changes that break "
        "its callers are reported as warnings.",
        max_length=128,
    )


class CreateWorkflowArguments(StrictArguments):
    definition: _DefinitionText | dict[str, Any] = _DEFINITION
    group: str | None = Field(
        default=None,
        description="The workflow group: required when the definition has no server block, "
        "else equal to its name.",
        max_length=200,
    )
    comment: str = _COMMENT


class UpdateWorkflowArguments(StrictArguments):
    name: str = _NAME
    definition: _DefinitionText | dict[str, Any] | None = Field(
        default=None,
        description="The whole new definition (one tool, the same name and group), as YAML "
        "text or as a JSON object; or send `patch` instead.",
    )
    patch: list[dict[str, Any]] | None = Field(
        default=None,
        description="A JSON Patch (RFC 6902) applied to get_workflow's definition of the "
        "latest draft (or of the published version when there is no newer draft).",
        max_length=MAX_PATCH_OPERATIONS,
    )
    comment: str = _COMMENT


class PublishWorkflowArguments(StrictArguments):
    name: str = _NAME
    version: int = Field(ge=1, description="The version to serve from now on.")
    force: bool = Field(
        default=False,
        description="Publish even though the version changes the result of (or fails) one of "
        "the workflow's examples, which otherwise refuses it naming them; recorded in the "
        "audit trail with the examples it failed.",
    )


class GetWorkflowArguments(StrictArguments):
    name: str = _NAME
    version: int | None = Field(
        default=None, ge=1, description="Which version (default: latest draft, else published)."
    )
    diff_from: int | None = Field(
        default=None,
        ge=1,
        description="Also answer the JSON Patch from this version's definition to this one's.",
    )


class ListWorkflowVersionsArguments(StrictArguments):
    name: str = _NAME


class PausedRunAction(StrictArguments):
    run_id: int = Field(ge=1, description="The paused test run, as the answer named it.")
    action: Literal["continue", "step", "stop"]


class TestWorkflowArguments(StrictArguments):
    name: str = _NAME
    version: int | None = Field(
        default=None, ge=1, description="Which version (default: latest draft, else published)."
    )
    arguments: dict[str, Any] = Field(
        default_factory=dict, description="The workflow's arguments, as its inputSchema says."
    )
    mocks: dict[str, Any] = Field(
        default_factory=dict,
        max_length=run_mocks.MAX_MOCKS,
        description=(
            "What mcp nodes answer instead of calling their servers, by node id or by "
            '"server.tool": the tool\'s result (a CallToolResult, or the bare value as its '
            'structured content), or {"from_run": <run id>} for what that node returned then '
            "(a run this key, or another key of its user, started; any run with runs:read). "
            "An approval node is mocked by its id with the decision it takes instead of "
            'waiting: {"decision": "approved" | "rejected" | "timeout", "comment"?, "form"?}; '
            "one not mocked waits for its approvers as in any run."
        ),
    )
    mock_all: bool = Field(
        default=False,
        description="Every mcp node not in `mocks` answers a value made from its tool's "
        "outputSchema, so nothing is called for real.",
    )
    breakpoints: list[Annotated[str, Field(max_length=128)]] = Field(
        default_factory=list,
        max_length=MAX_BREAKPOINTS,
        description="Node ids the run pauses before (status paused, holding nothing): the "
        "call then answers where it paused and the context there. Send it on with "
        "`paused_run`; a pause left GRAPHS_BREAKPOINT_EXPIRY_SECONDS (an hour) expires.",
    )
    paused_run: PausedRunAction | None = Field(
        default=None,
        description="Instead of a new run, send on a test run of yours paused at a "
        "breakpoint: continue (to the next breakpoint or the end), step (one node) or stop.",
    )
    examples: bool = Field(
        default=False,
        description="Instead of one run, check the version against every example of the "
        "workflow (runs reviewers kept): each replays its recorded tool outputs and decisions, "
        "calling no server and recording no run. Answers, per example, whether the result is "
        "the same, else its differences or error. Give no `arguments`, `mocks` or `mock_all` "
        "with it.",
    )


# What an example check answers `test_workflow` (graphs/authoring/example_checks.py).
_EXAMPLE_RESULT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "example": {"type": "integer"},
        "run_id": {"type": ["integer", "null"], "description": "The run it was kept from."},
        "passed": {"type": "boolean"},
        "differences": {
            "type": "object",
            "description": "Where the result differs: items of {path, a (the example's), b "
            "(now)}; cut: more were not listed.",
        },
        "error": {"type": "string", "description": "Why the version's run failed."},
    },
    "required": ["example", "run_id", "passed"],
}


def _test(arguments: TestWorkflowArguments, caller: Caller) -> StartRun | dict[str, Any]:
    if arguments.examples:
        return _test_examples(arguments, caller)
    if arguments.paused_run is not None:
        return _paused_run_sent_on(arguments, arguments.paused_run, caller)
    version = drafts.version_to_test(name=arguments.name, number=arguments.version, caller=caller)
    try:
        breakpoints = breakpoints_checked(version.definition, arguments.breakpoints)
    except PauseError as exc:
        raise ToolError(exc.message) from None
    answers = run_mocks.mock_answers(
        version, arguments.mocks, mock_all=arguments.mock_all, caller=with_same_owner_actors(caller)
    )
    tool = _test_tool(version, arguments.name)
    return StartRun(tool, arguments.arguments, mocks=answers, breakpoints=breakpoints)


def _test_tool(version: WorkflowVersion, name: str) -> WorkflowTool:
    """The version as the tool a test run of it is followed as."""
    definition = version.definition
    return WorkflowTool(
        name=name,
        description=definition.get("description", ""),
        input_schema=definition.get("inputSchema") or {},
        output_schema=definition.get("outputSchema"),
        workflow_id=version.workflow_id,
        version_id=version.pk,
        digest=version.digest,
        group=version.workflow.group.slug,
    )


def _paused_run_sent_on(
    arguments: TestWorkflowArguments, paused: PausedRunAction, caller: Caller
) -> StartRun:
    """Continue, step or stop a test run the caller (or its user) started, and follow it to
    its next pause or its end."""
    if arguments.arguments or arguments.mocks or arguments.breakpoints or arguments.mock_all:
        raise ToolError(
            "paused_run sends on a run that has its arguments, mocks and breakpoints: give "
            "only name and paused_run."
        )
    version = test_run_version(paused.run_id, arguments.name)
    if version is None:
        raise ToolError(f"No test run {paused.run_id} of {arguments.name!r}.")
    try:
        pause_end(
            paused.run_id,
            paused.action,
            caller.actor,
            started_by=with_same_owner_actors(caller).own_actors,
        )
    except PauseError as exc:
        raise ToolError(exc.message) from None
    return StartRun(_test_tool(version, arguments.name), {}, continues=paused.run_id)


def _test_examples(arguments: TestWorkflowArguments, caller: Caller) -> dict[str, Any]:
    others = {"arguments", "mocks", "mock_all", "breakpoints", "paused_run"}
    given = sorted(others & arguments.model_fields_set)
    if given:
        raise ToolError(
            f"With examples: true, leave out {', '.join(given)}: each example brings its own "
            "arguments and its recorded tool outputs. Call test_workflow without `examples` "
            "to run the version with arguments and mocks of your own."
        )
    version = drafts.version_to_test(name=arguments.name, number=arguments.version, caller=caller)
    return examples.examples_test(version, caller).as_json()


Handler = TypeVar("Handler", bound=Callable[..., Any])


def _refusals_answered(handler: Handler) -> Handler:
    """`handler`, with the drafts' and the mocks' refusals turned into tool errors (a draft's
    validation problems as their details, for a program to act on)."""

    @functools.wraps(handler)
    def answer(arguments: Any, caller: Caller) -> Any:
        try:
            return handler(arguments, caller)
        except drafts.DraftRefused as exc:
            details = {"problems": exc.problems} if exc.problems else None
            raise ToolError(exc.message, details) from None
        except run_mocks.MockRefused as exc:
            raise ToolError(str(exc)) from None
        except examples.ExampleRefused as exc:
            raise ToolError(exc.message) from None

    return cast(Handler, answer)


def _validate(arguments: ValidateWorkflowArguments, caller: Caller) -> dict[str, Any]:
    return validate_workflow(arguments.definition, caller=caller, name=arguments.name).as_dict()


def _saved(saved: drafts.DraftSaved) -> dict[str, Any]:
    return {
        "workflow": saved.workflow,
        "version": saved.version,
        "status": "draft",
        "created": saved.created,
    }


def _create(arguments: CreateWorkflowArguments, caller: Caller) -> dict[str, Any]:
    saved = drafts.draft_create(
        definition=arguments.definition,
        group=arguments.group,
        caller=caller,
        comment=arguments.comment,
    )
    return _saved(saved)


def _update(arguments: UpdateWorkflowArguments, caller: Caller) -> dict[str, Any]:
    saved = drafts.draft_update(
        name=arguments.name,
        caller=caller,
        definition=arguments.definition,
        patch=arguments.patch,
        comment=arguments.comment,
    )
    return _saved(saved)


def _publish(arguments: PublishWorkflowArguments, caller: Caller) -> dict[str, Any]:
    version = drafts.version_publish(
        name=arguments.name, number=arguments.version, caller=caller, force=arguments.force
    )
    return {
        "workflow": arguments.name,
        "version": version.number,
        "status": version.status,
        "examples": examples.version_examples_text(version),
    }


def _get(arguments: GetWorkflowArguments, caller: Caller) -> dict[str, Any]:
    return drafts.workflow_view(
        name=arguments.name, number=arguments.version, diff_from=arguments.diff_from
    )


def _list_versions(arguments: ListWorkflowVersionsArguments, caller: Caller) -> dict[str, Any]:
    return drafts.version_list(name=arguments.name)


BUILDER_TOOLS: tuple[ToolDefinition, ...] = (
    ToolDefinition(
        name="test_workflow",
        title="Test a workflow",
        description=(
            "Run a draft or published version of a workflow with `arguments`, its mcp nodes "
            "answered by `mocks` where you give them (or all of them with mock_all), the rest "
            "calling their servers for real. Recorded as a test run. Answers the result, the "
            "run id and each node's output, so you can see where a draft goes wrong. With "
            "examples: true, checks the version against the workflow's examples instead (what "
            "publish_workflow checks) and answers each one's outcome."
        ),
        arguments=TestWorkflowArguments,
        output_schema={
            "type": "object",
            "properties": {
                "result": {},
                "run_id": {"type": "integer"},
                "nodes": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"id": {"type": "string"}, "output": {}},
                        "required": ["id"],
                    },
                },
                "nodes_truncated": {"type": "boolean"},
                "workflow": {"type": "string"},
                "version": {"type": "integer"},
                "checked": {"type": "integer"},
                "passed": {"type": "integer"},
                "examples": {"type": "array", "items": _EXAMPLE_RESULT},
            },
            # A test run's report, or (examples: true) the examples' outcomes.
            "anyOf": [{"required": ["run_id", "nodes"]}, {"required": ["examples"]}],
        },
        handler=_refusals_answered(_test),
        # Its unmocked nodes call their servers for real, whose effects are unknown here.
        writes=True,
        reads_documents=True,
    ),
    ToolDefinition(
        name="validate_workflow",
        title="Validate a workflow",
        description=(
            "Check a workflow definition before storing it: structure, every mcp node's "
            "server, tool and arguments against the tool's real inputSchema, JSONata and JSON "
            "Logic expressions, and data flow between nodes. Answers {valid, problems}; each "
            "problem names its node, a JSON Pointer `path` into what you sent, how to fix it, "
            "and often a `fix` (a JSON Patch): apply the fixes and validate again until valid, "
            "then create_workflow."
        ),
        arguments=ValidateWorkflowArguments,
        output_schema={
            "type": "object",
            "properties": {
                "valid": {"type": "boolean"},
                "problems": {"type": "array", "items": _PROBLEM},
            },
            "required": ["valid", "problems"],
        },
        handler=_validate,
        scope="tools:read",
        reads_documents=True,
    ),
    ToolDefinition(
        name="create_workflow",
        title="Create a workflow (draft)",
        description=(
            "Store a new workflow as a draft, after validating it (an invalid one is refused "
            "with validate_workflow's problems). A draft is not served as a tool: run it with "
            "test_workflow, then publish_workflow."
        ),
        arguments=CreateWorkflowArguments,
        output_schema=_SAVED,
        handler=_refusals_answered(_create),
        scope="workflows:write",
        writes=True,
        reads_documents=True,
    ),
    ToolDefinition(
        name="update_workflow",
        title="Change a workflow (draft)",
        description=(
            "Store a new draft of a workflow: a whole new definition, or a JSON Patch applied "
            "to get_workflow's definition of the latest draft (or the published version). "
            "Validated first; the published version keeps being served until you publish. "
            "Only the owners of the workflow's group (or workflows:admin) may."
        ),
        arguments=UpdateWorkflowArguments,
        output_schema=_SAVED,
        handler=_refusals_answered(_update),
        scope="workflows:write",
        writes=True,
        reads_documents=True,
    ),
    ToolDefinition(
        name="publish_workflow",
        title="Publish a workflow version",
        description=(
            "Serve a version of a workflow as its tool from now on (a draft, or an earlier "
            "version to roll back to), after validating it again against today's servers and "
            "checking it against the workflow's examples: a version that changes an example's "
            "result is refused naming it and its differences, unless force is true. "
            "Needs the scope workflows:publish and ownership of the workflow's group."
        ),
        arguments=PublishWorkflowArguments,
        output_schema={
            **_SAVED,
            "properties": {
                **_SAVED["properties"],
                "examples": {
                    "type": "string",
                    "description": "How the version did against the examples, e.g. "
                    '"examples: 3/3 passed".',
                },
            },
        },
        handler=_refusals_answered(_publish),
        scope="workflows:publish",
        writes=True,
        reads_documents=True,
    ),
    ToolDefinition(
        name="get_workflow",
        title="Read a workflow",
        description=(
            "A workflow's definition (a JSON document you can change and send back to "
            "update_workflow), its version and status; with diff_from, the JSON Patch between "
            "two versions. Provider secrets are shown masked."
        ),
        arguments=GetWorkflowArguments,
        output_schema={
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                **_VERSION_FIELDS,
                "published_version": {"type": ["integer", "null"]},
                "definition": {"type": "object"},
                "diff_from": {"type": "integer"},
                "diff": {"type": "array"},
            },
            "required": ["name", "version", "status", "definition"],
        },
        handler=_refusals_answered(_get),
        scope="tools:read",
    ),
    ToolDefinition(
        name="list_workflow_versions",
        title="List a workflow's versions",
        description=(
            "A workflow's versions, newest first: status (draft, published, retired), who "
            "made each (a user or an API key) and when."
        ),
        arguments=ListWorkflowVersionsArguments,
        output_schema={
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "published_version": {"type": ["integer", "null"]},
                "total": {"type": "integer"},
                "versions": {
                    "type": "array",
                    "items": {"type": "object", "properties": _VERSION_FIELDS},
                },
            },
            "required": ["name", "versions"],
        },
        handler=_refusals_answered(_list_versions),
        scope="tools:read",
    ),
)
