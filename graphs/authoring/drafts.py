"""Workflows that agents build: drafts, their versions, and publishing one.

A draft is a version that is not served. `draft_create` and `draft_update` validate a definition
(graphs/authoring/validation.py) and store it as a draft; `version_publish` makes a version the
served one after validating it again against today's providers and checking it against the
workflow's examples (graphs/authoring/example_checks.py). `workflow_view` and `version_list`
read them back. Saving in the admin or importing a file still publishes at once
(graphs/authoring/services.py `workflow_save`).

Definitions travel as graph documents (the seed 003 format, either file form): what
`workflow_view` returns can be changed and sent back. Provider secrets (env and header
values) are shown masked, and a masked entry still names its provider (graphs/authoring/files.py).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import jsonpatch
from django.core.exceptions import ValidationError
from django.db import transaction

from graphs.authoring.example_checks import ExamplesFailed, examples_publish
from graphs.authoring.files import GraphFileError, graph_document, graph_import, provider_entry
from graphs.authoring.patching import PatchRefused, apply_patch_within_budget
from graphs.authoring.rights import group_change_refusal
from graphs.authoring.validation import read_definition, validate_workflow
from graphs.engine.checks.problems import Problem
from graphs.engine.format.flat_form import nested_form
from graphs.models import Workflow, WorkflowGroup, WorkflowVersion
from nodespecs.callers import Caller
from nodespecs.models import Provider


class DraftRefused(Exception):
    """A draft or a publication refused: the message says why, `problems` (validation's
    problems, as dicts) say where and how to fix it."""

    def __init__(self, message: str, problems: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.problems = problems or []


@dataclass(frozen=True)
class DraftSaved:
    """A stored draft: the workflow and its version number."""

    workflow: str
    version: int
    created: bool


def _refuse(refusal: str | None) -> None:
    """Stop with `refusal` (a right the caller lacks), when there is one."""
    if refusal is not None:
        raise DraftRefused(refusal)


def _document(definition: str | dict[str, Any]) -> dict[str, Any]:
    """A definition as a document, YAML read safely; `DraftRefused` when it is not one."""
    document = read_definition(definition)
    if isinstance(document, Problem):
        raise DraftRefused(
            f"The definition cannot be stored: {document.message}.", [document.as_dict()]
        )
    return document


def _validated(document: dict[str, Any], caller: Caller, name: str | None) -> None:
    report = validate_workflow(document, caller=caller, name=name)
    if not report.valid:
        errors = sum(1 for problem in report.problems if problem.severity == "error")
        raise DraftRefused(
            f"The definition has {errors} error(s); nothing was stored. Fix them (each "
            "problem says how, and most carry a `fix` to apply) and send it again.",
            [problem.as_dict() for problem in report.problems],
        )


def _one_tool(document: dict[str, Any]) -> dict[str, Any]:
    """The document in the nested form, holding exactly one tool."""
    nested, problems = nested_form(document)
    tools = nested.get("tools")
    if problems or not isinstance(tools, list) or len(tools) != 1:
        count = len(tools) if isinstance(tools, list) else 0
        raise DraftRefused(
            f"The definition must hold exactly one tool (it holds {count}): one workflow is "
            "created or updated at a time. Send one tool per call."
        )
    return dict(nested)


def with_registered_servers(document: dict[str, Any]) -> dict[str, Any]:
    """`document` (nested form) with an `mcpServers` entry for each server its mcp nodes name
    that it does not declare but a registered provider of that name is: agents may name a
    registered provider, as the catalog shows its tools, without copying its settings."""
    declared = document.get("mcpServers")
    declared = declared if isinstance(declared, dict) else {}
    named = {
        node.get("server")
        for tool in document.get("tools") or []
        if isinstance(tool, dict)
        for node in tool.get("nodes") or []
        if isinstance(node, dict) and node.get("type") == "mcp"
    }
    missing = {name for name in named if isinstance(name, str) and name not in declared}
    providers = Provider.objects.filter(name__in=missing) if missing else []
    added = {provider.name: provider_entry(provider) for provider in providers}
    return {**document, "mcpServers": {**declared, **added}} if added else document


def _store(document: dict[str, Any], caller: Caller, comment: str) -> DraftSaved:
    document = with_registered_servers(document)
    try:
        report = graph_import(text=document, caller=caller, publish=False, comment=comment)
    except GraphFileError as exc:
        raise DraftRefused(str(exc)) from None
    [(name, number)] = report.drafts.items()
    return DraftSaved(workflow=name, version=number, created=name in report.created)


@transaction.atomic
def draft_create(
    *, definition: str | dict[str, Any], group: str | None, caller: Caller, comment: str = ""
) -> DraftSaved:
    """Store a new workflow as a draft: `definition` holds exactly one tool, whose name no
    workflow has yet; `group` names its workflow group, and is required when the definition
    has no `server` block (it must then equal the block's name)."""
    document = _one_tool(_document(definition))
    server = document.get("server")
    if server is None:
        if not group:
            raise DraftRefused(
                "Name the workflow group: the definition has no `server` block, so pass "
                "`group` (a new or existing group's name)."
            )
        existing = WorkflowGroup.objects.filter(name=group).first()
        document["server"] = {
            "name": group,
            "version": existing.version if existing else "1.0.0",
        }
        document.setdefault("version", "1.0")
    elif group and isinstance(server, dict) and server.get("name") != group:
        raise DraftRefused(
            f"`group` is {group!r} but the definition's server.name is "
            f"{server.get('name')!r}: they must be equal (or leave `group` out)."
        )
    server = document["server"]
    group_name = server.get("name") if isinstance(server, dict) else None
    existing_group = WorkflowGroup.objects.filter(name=group_name).first() if group_name else None
    if existing_group is not None:
        _refuse(group_change_refusal(existing_group, caller, "create workflows"))
    name = document["tools"][0].get("name") if isinstance(document["tools"][0], dict) else None
    if isinstance(name, str) and Workflow.objects.filter(name=name).exists():
        raise DraftRefused(
            f"A workflow named {name!r} exists: change it with update_workflow, or choose "
            "another name."
        )
    _validated(document, caller, None)
    return _store(document, caller, comment or "Created as a draft")


def _base_version(workflow: Workflow) -> WorkflowVersion:
    """What an update starts from: the latest draft newer than the published version, else
    the published version."""
    latest = workflow.versions.order_by("-number").first()
    current = workflow.current_version
    if latest is None:
        raise DraftRefused(f"{workflow.name!r} has no version to change.")
    if latest.published_at is None and (current is None or latest.number > current.number):
        return latest
    return current or latest


@transaction.atomic
def draft_update(
    *,
    name: str,
    caller: Caller,
    definition: str | dict[str, Any] | None = None,
    patch: list[dict[str, Any]] | None = None,
    comment: str = "",
    based_on: int | None = None,
) -> DraftSaved:
    """Store a new draft of workflow `name`: a whole new `definition`, or a JSON Patch
    applied to the document of its latest draft (or of its published version when it has
    no draft newer). The definition keeps the workflow's name and group.

    With `based_on` (the number of the version the author started from), refuse when a
    newer version was stored since: two authors editing one workflow do not overwrite each
    other unnoticed."""
    workflow = _workflow(name)
    _refuse(group_change_refusal(workflow.group, caller, "change workflows"))
    if based_on is not None:
        _refuse(_moved_on(workflow, based_on))
    if (definition is None) == (patch is None):
        raise DraftRefused("Send either `definition` (the whole new one) or `patch`, not both.")
    if patch is not None:
        base = version_document(_base_version(workflow))
        try:  # op by op, each within the definition's size budget (graphs/authoring/patching.py)
            document = apply_patch_within_budget(base, patch)
        except PatchRefused as exc:
            raise DraftRefused(str(exc)) from None
        document = _document(document)
    else:
        document = _document(definition)  # type: ignore[arg-type]  # one of the two is set
    document = _one_tool(document)
    tool = document["tools"][0]
    if not isinstance(tool, dict) or tool.get("name") != name:
        shown = tool.get("name") if isinstance(tool, dict) else None
        raise DraftRefused(
            f"The definition's tool is named {shown!r}, not {name!r}: a workflow keeps its "
            "name. To make another workflow, use create_workflow."
        )
    server = document.get("server")
    if not isinstance(server, dict) or server.get("name") != workflow.group.name:
        raise DraftRefused(
            f"The definition's server.name must be {workflow.group.name!r}, the workflow's "
            "group: a workflow keeps its group."
        )
    _validated(document, caller, name)
    return _store(document, caller, comment or "Updated as a draft")


def _moved_on(workflow: Workflow, based_on: int) -> str | None:
    """Why a change started from version `based_on` may not be stored: the version a change
    starts from now (the latest draft, else the published one) is another, saved or
    published since; None when it is the same. The workflow's row is locked until the
    transaction ends, so a second save made at the same moment waits, then sees the first
    one's version."""
    Workflow.objects.select_for_update().filter(pk=workflow.pk).first()
    workflow.refresh_from_db(fields=["current_version"])
    base = _base_version(workflow)
    if base.number == based_on:
        return None
    when = base.created_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    return (
        f"{workflow.name!r} moved on while you edited: version {base.number} "
        f"({base.status}, saved by {base.author_name or 'someone'} at {when}) is now the one "
        f"a change starts from, not version {based_on} you opened. Nothing was stored. Open "
        f"version {base.number} to see the change, then make yours again (copy your YAML "
        "first)."
    )


def _workflow(name: str) -> Workflow:
    workflow = Workflow.objects.select_related("group", "current_version").filter(name=name).first()
    if workflow is None:
        raise DraftRefused(
            f"No workflow named {name!r}. list_workflow_versions and get_workflow take the "
            "name of an existing workflow; create_workflow makes a new one."
        )
    if workflow.current_version is not None:
        # As for the versions read through `workflow.versions`: a version's status and
        # document read its workflow, which would otherwise be read again (and its group).
        workflow.current_version.workflow = workflow
    return workflow


def version_to_test(*, name: str, number: int | None, caller: Caller) -> WorkflowVersion:
    """Version `number` of workflow `name` for `caller` to test; by default its latest draft,
    else the published one. `DraftRefused` names what exists when either is unknown, and
    refuses a draft (never served) to anyone but the group's owners and workflows:admin."""
    workflow = _workflow(name)
    version = _version(workflow, number)
    if version.published_at is None:
        _refuse(group_change_refusal(workflow.group, caller, "test drafts"))
    return version


def _version(workflow: Workflow, number: int | None) -> WorkflowVersion:
    if number is None:
        return _base_version(workflow)
    version = workflow.versions.filter(number=number).first()
    if version is None:
        numbers = list(workflow.versions.order_by("number").values_list("number", flat=True))
        raise DraftRefused(
            f"{workflow.name!r} has no version {number}; its versions: "
            f"{', '.join(map(str, numbers)) or 'none'}."
        )
    return version


def version_publish(
    *, name: str, number: int, caller: Caller, force: bool = False
) -> WorkflowVersion:
    """Serve version `number` of workflow `name` from now on, after validating it again
    against today's providers (a version that no longer validates is refused with its
    problems) and checking it against the workflow's examples (one that changes an example's
    result is refused naming it, unless `force`: graphs/authoring/example_checks.py)."""
    workflow = _workflow(name)
    _refuse(group_change_refusal(workflow.group, caller, "publish workflows"))
    version = _version(workflow, number)
    _validated(version_document(version), caller, None)
    try:
        # The workflow as published now, for the version's status; publishing has
        # set the version's `published_at` itself. Not in one transaction with the checks
        # before it: they are kept even when publishing is refused.
        version.workflow, _ = examples_publish(version=version, caller=caller, force=force)
    except ExamplesFailed as exc:
        raise DraftRefused(exc.message, exc.problems) from None
    except ValidationError as exc:
        raise DraftRefused(
            f"Version {number} of {name!r} cannot be served: {'; '.join(exc.messages)}"
        ) from None
    return version


def version_document(version: WorkflowVersion) -> dict[str, Any]:
    """The graph document of one version (nested form, secrets masked)."""
    workflow = version.workflow
    return graph_document(
        workflow.group,
        [copy.deepcopy(version.definition)],
        version.limits,
        version.servers,
        masked=True,
    )


def _published_number(workflow: Workflow) -> int | None:
    """The number of the version the workflow serves, if any."""
    return workflow.current_version.number if workflow.current_version else None


def _version_summary(version: WorkflowVersion) -> dict[str, Any]:
    return {
        "version": version.number,
        "status": version.status,
        "author": version.author_name,
        "comment": version.comment,
        "created_at": version.created_at.isoformat(),
        "published_at": version.published_at.isoformat() if version.published_at else None,
    }


def workflow_view(
    *, name: str, number: int | None = None, diff_from: int | None = None
) -> dict[str, Any]:
    """A version of workflow `name` (by default its latest draft, else the published one):
    its document, number and status, and with `diff_from` the JSON Patch that turns version
    `diff_from`'s document into this one's."""
    workflow = _workflow(name)
    version = _version(workflow, number)
    document = version_document(version)
    view: dict[str, Any] = {
        "name": workflow.name,
        **_version_summary(version),
        "published_version": _published_number(workflow),
        "definition": document,
    }
    if diff_from is not None:
        earlier = version_document(_version(workflow, diff_from))
        view["diff_from"] = diff_from
        view["diff"] = jsonpatch.make_patch(earlier, document).patch
    return view


# The most versions `version_list` answers with: a workflow saved thousands of times would
# otherwise answer with all of them.
MAX_VERSIONS_LISTED = 100


def version_list(*, name: str) -> dict[str, Any]:
    """The newest MAX_VERSIONS_LISTED versions of workflow `name`, newest first, with who
    made each and when; `total` counts them all."""
    workflow = _workflow(name)
    versions = workflow.versions.order_by("-number")
    return {
        "name": workflow.name,
        "published_version": _published_number(workflow),
        "total": versions.count(),
        "versions": [_version_summary(v) for v in versions[:MAX_VERSIONS_LISTED]],
    }
