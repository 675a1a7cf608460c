"""The canvas editor of a workflow in the admin: its page, and the JSON the page's script asks
as the author works (check, tools, save, publish, diff). Each view parses the request, calls
graphs/authoring (canvas.py, drafts.py) and writes the answer; the page is
templates/admin/graphs/workflow/canvas.html with graphs/static/graphs/canvas/.

Every change is stored as a draft version, based on the version the author opened: a save
after someone else's is refused, saying whose (graphs/authoring/drafts.py `draft_update`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.contrib.admin import ModelAdmin
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse

from graphs.authoring.canvas import canvas_check, canvas_diff, canvas_state, canvas_tools
from graphs.authoring.drafts import DraftRefused, draft_create, draft_update, version_publish
from graphs.authoring.validation import MAX_DEFINITION_BYTES
from graphs.models import Workflow, WorkflowGroup
from nodespecs.admin.audit import admin_user
from nodespecs.callers import Caller, caller_user

# A request holds the definition once, as YAML or JSON, and a little more.
MAX_REQUEST_BYTES = 2 * MAX_DEFINITION_BYTES
#: The longest search text taken from the palette.
MAX_QUERY_CHARS = 500


class BadRequest(Exception):
    """A request the page's script would never send: the message says what was wrong."""


class Forbidden(Exception):
    """A request the signed-in author may not make, found once its body is read."""


NOT_ALLOWED = "You may not change workflows: ask for the change permission."


def canvas_urls(admin: ModelAdmin[Workflow]) -> list[Any]:
    """The editor's URLs, each behind the admin's sign-in and CSRF check."""
    views = CanvasViews(admin)
    site = admin.admin_site
    return [
        path("canvas/new/", site.admin_view(views.page), name="graphs_workflow_canvas_new"),
        path("canvas/check/", site.admin_view(views.check), name="graphs_workflow_canvas_check"),
        path("canvas/tools/", site.admin_view(views.tools), name="graphs_workflow_canvas_tools"),
        path("canvas/save/", site.admin_view(views.save), name="graphs_workflow_canvas_save"),
        path(
            "<int:workflow_id>/canvas/",
            site.admin_view(views.page),
            name="graphs_workflow_canvas",
        ),
        path(
            "<int:workflow_id>/canvas/state/",
            site.admin_view(views.state),
            name="graphs_workflow_canvas_state",
        ),
        path(
            "<int:workflow_id>/canvas/publish/",
            site.admin_view(views.publish),
            name="graphs_workflow_canvas_publish",
        ),
        path(
            "<int:workflow_id>/canvas/diff/",
            site.admin_view(views.diff),
            name="graphs_workflow_canvas_diff",
        ),
    ]


def _refused(
    message: str, status: int, problems: list[dict[str, Any]] | None = None
) -> JsonResponse:
    return JsonResponse({"error": message, "problems": problems or []}, status=status)


def _body(request: HttpRequest) -> dict[str, Any]:
    """The request's JSON object, bounded; `BadRequest` saying what was wrong."""
    try:
        length = int(request.headers.get("Content-Length") or 0)
    except ValueError:
        raise BadRequest("The request's Content-Length is not a number.") from None
    if length > MAX_REQUEST_BYTES:
        raise BadRequest(
            f"The request is {length:,} bytes, over the editor's {MAX_REQUEST_BYTES:,}: the "
            f"definition itself may hold at most {MAX_DEFINITION_BYTES:,}."
        )
    try:
        body = json.loads(request.body or b"{}")
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"The request body is not JSON: {exc}.") from None
    if not isinstance(body, dict):
        raise BadRequest("The request body must be a JSON object.")
    return body


def _text(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise BadRequest(f"`{key}` must be a string.")
    return value


def _number(body: dict[str, Any], key: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**31:
        raise BadRequest(f"`{key}` must be a version number (a whole number above 0).")
    return value


class CanvasViews:
    """The views of the workflow admin's editor: its permissions decide who may do what."""

    def __init__(self, admin: ModelAdmin[Workflow]) -> None:
        self.admin = admin

    def _answer(
        self, request: HttpRequest, allowed: bool, work: Callable[[Caller], Any], status: int = 200
    ) -> JsonResponse:
        """`work`'s JSON for the signed-in author, or why not: 403 without the right, 400 for
        a malformed request, 409 when drafts refuse (invalid, moved on, examples changed)."""
        if not allowed:
            return _refused(NOT_ALLOWED, 403)
        try:
            return JsonResponse(work(caller_user(admin_user(request))), status=status, safe=False)
        except Forbidden as exc:
            return _refused(str(exc), 403)
        except BadRequest as exc:
            return _refused(str(exc), 400)
        except DraftRefused as exc:
            return _refused(exc.message, 409, exc.problems)

    def page(self, request: HttpRequest, workflow_id: int | None = None) -> HttpResponse:
        """The editor: of workflow `workflow_id`, or of a new workflow (a group to choose)."""
        workflow = get_object_or_404(Workflow, pk=workflow_id) if workflow_id else None
        allowed = (
            self.admin.has_change_permission(request, workflow)
            if workflow
            else self.admin.has_add_permission(request)
        )
        if not allowed:
            return HttpResponse("You may not change workflows.", status=403)
        urls = {
            "check": reverse("admin:graphs_workflow_canvas_check"),
            "tools": reverse("admin:graphs_workflow_canvas_tools"),
            "save": reverse("admin:graphs_workflow_canvas_save"),
            "page": reverse("admin:graphs_workflow_canvas", args=[0]),
            "change": reverse("admin:graphs_workflow_change", args=[0]),
        }
        if workflow is not None:
            for name in ("state", "publish", "diff"):
                urls[name] = reverse(f"admin:graphs_workflow_canvas_{name}", args=[workflow.pk])
            urls["test_run"] = reverse("admin:graphs_workflow_test_run", args=[workflow.pk])
        context = {
            **self.admin.admin_site.each_context(request),
            "title": f"{workflow.name} on the canvas" if workflow else "New workflow on the canvas",
            "opts": Workflow._meta,
            # The canvas needs the page's width more than the admin's list of models.
            "is_nav_sidebar_enabled": False,
            "workflow": workflow,
            "groups": list(WorkflowGroup.objects.order_by("name").values_list("name", flat=True)),
            "canvas_config": {
                "workflowId": workflow.pk if workflow else None,
                "name": workflow.name if workflow else None,
                "urls": urls,
            },
        }
        return TemplateResponse(request, "admin/graphs/workflow/canvas.html", context)

    def _may_edit(self, request: HttpRequest) -> bool:
        """Whether the author may use the editor at all: the page of a new workflow opens
        with the add permission alone, and checks and searches tools as it is edited."""
        return self.admin.has_change_permission(request) or self.admin.has_add_permission(request)

    @staticmethod
    def _workflow(workflow_id: int) -> Workflow:
        return get_object_or_404(Workflow, pk=workflow_id)

    def state(self, request: HttpRequest, workflow_id: int) -> JsonResponse:
        """The workflow as the editor opens it (graphs/authoring/canvas.py `canvas_state`)."""
        workflow = self._workflow(workflow_id)
        return self._answer(
            request,
            self.admin.has_change_permission(request, workflow),
            lambda caller: canvas_state(workflow.name),
        )

    def check(self, request: HttpRequest) -> JsonResponse:
        """POST {yaml | document, name?, node?}: the document, its YAML, its problems and
        what node `node`'s expressions can read."""
        if request.method != "POST":
            return _refused("Send the definition with POST.", 405)

        def work(caller: Caller) -> dict[str, Any]:
            body = _body(request)
            yaml_text = _text(body, "yaml")
            if yaml_text is None and "document" not in body:
                raise BadRequest("Send `yaml` (the text) or `document` (the canvas's JSON).")
            return canvas_check(
                caller=caller,
                yaml_text=yaml_text,
                document=body.get("document"),
                name=_text(body, "name"),
                node_id=_text(body, "node"),
            )

        return self._answer(request, self._may_edit(request), work)

    def tools(self, request: HttpRequest) -> JsonResponse:
        """GET ?q=: the providers' tools an `mcp` node can call, as search finds them;
        ?server=&tool=: that one tool."""
        query = request.GET.get("q", "")[:MAX_QUERY_CHARS]
        server, tool = request.GET.get("server"), request.GET.get("tool")
        return self._answer(
            request,
            self._may_edit(request),
            lambda caller: {"tools": canvas_tools(query, caller, server=server, tool=tool)},
        )

    def save(self, request: HttpRequest) -> JsonResponse:
        """POST {document, name? (an existing workflow), group? (a new one), based_on,
        comment?}: store a draft; 201 {workflow, version, id, created}."""
        if request.method != "POST":
            return _refused("Save with POST.", 405)

        def work(caller: Caller) -> dict[str, Any]:
            body = _body(request)
            document = body.get("document")
            if not isinstance(document, dict):
                raise BadRequest("`document` must be the graph document (a JSON object).")
            name = _text(body, "name")
            comment = _text(body, "comment") or "Edited on the canvas"
            if name is None:
                if not self.admin.has_add_permission(request):
                    raise Forbidden("You may not add workflows: ask for the add permission.")
                saved = draft_create(
                    definition=document, group=_text(body, "group"), caller=caller, comment=comment
                )
            else:
                # The right to add workflows is no right to change one that exists.
                existing = Workflow.objects.filter(name=name).first()
                if not self.admin.has_change_permission(request, existing):
                    raise Forbidden(NOT_ALLOWED)
                saved = draft_update(
                    name=name,
                    caller=caller,
                    definition=document,
                    based_on=_number(body, "based_on"),
                    comment=comment,
                )
            workflow = Workflow.objects.get(name=saved.workflow)
            return {
                "workflow": saved.workflow,
                "version": saved.version,
                "id": workflow.pk,
                "created": saved.created,
            }

        return self._answer(request, self._may_edit(request), work, status=201)

    def publish(self, request: HttpRequest, workflow_id: int) -> JsonResponse:
        """POST {version, force?}: serve that version from now on, after its examples pass
        (or anyway, with force); publishing an older version is a rollback."""
        if request.method != "POST":
            return _refused("Publish with POST.", 405)
        workflow = self._workflow(workflow_id)

        def work(caller: Caller) -> dict[str, Any]:
            body = _body(request)
            number = _number(body, "version")
            if number is None:
                raise BadRequest("`version` (the number of the version to serve) is required.")
            version = version_publish(
                name=workflow.name, number=number, caller=caller, force=body.get("force") is True
            )
            return {"workflow": workflow.name, "published_version": version.number}

        return self._answer(request, self.admin.has_change_permission(request, workflow), work)

    def diff(self, request: HttpRequest, workflow_id: int) -> JsonResponse:
        """GET ?from=&to=: the lines that differ between two versions' YAML."""
        workflow = self._workflow(workflow_id)

        def work(caller: Caller) -> dict[str, Any]:
            try:
                earlier, later = int(request.GET["from"]), int(request.GET["to"])
            except (KeyError, ValueError):
                raise BadRequest("Give `from` and `to`, two version numbers.") from None
            return canvas_diff(workflow.name, earlier, later)

        return self._answer(request, self.admin.has_change_permission(request, workflow), work)
