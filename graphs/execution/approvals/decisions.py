"""Deciding a run that waits at an approval node, once, and sending it on.

Every way a decision comes — a reviewer on the Approvals page, a key over REST, the calling
client's answer, the timer — ends in `decide`. It checks the decision, then takes it with one
conditional update (`waiting` → going on): of two decisions that race, the first wins and the
second is told who decided and when. The run then goes on where the mode says: a worker
(queued: the run is queued again, and the worker that claims it resumes it from its
`Approval`), or a thread of this process (direct).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from graphs.engine.stops.approval_forms import form_value_problems
from graphs.execution import telemetry
from graphs.execution.resuming.going_on import go_on, going_on_fields
from graphs.models import Approval, Run
from nodespecs.audit import audit_record
from nodespecs.callers import Caller, oauth_actor_user
from nodespecs.models import AuditEvent

logger = logging.getLogger(__name__)

# What a person may decide; a timeout is the timer's alone.
PEOPLE_DECISIONS = (Approval.Decision.APPROVED, Approval.Decision.REJECTED)
MAX_COMMENT_CHARS = 2000


class DecisionError(Exception):
    """A decision that was not taken: why, and the HTTP status that says so (400 bad input,
    403 not this decider's to take, 404 no such run, 409 the run does not wait any more)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Decider:
    """Who decides: `kind` user, api_key, client or timer, the id and name the run's history
    records, and the actors that are this same person (the key or user that started a run
    may not decide it: separation of duties, unless APPROVAL_ALLOW_SELF_DECISION)."""

    kind: str
    id: str
    name: str
    actors: frozenset[str] = frozenset()

    def as_json(self) -> dict[str, str] | None:
        if self.kind == "timer":
            return None
        return {"kind": self.kind, "id": self.id, "name": self.name}


TIMER = Decider("timer", "", "timeout")


def decider_of(caller: Caller) -> Decider:
    """The reviewer a `Caller` is: a person in the admin, or an API key."""
    actors = caller.own_actors
    if caller.key_owner_name:
        actors |= {caller.key_owner_name}
    if caller.is_api_caller:
        return Decider("api_key", caller.actor, caller.trail_name, actors)
    return Decider("user", str(caller.user_id or ""), caller.actor, actors)


@dataclass(frozen=True)
class Decided:
    """A decision taken: the run goes on along `decision`."""

    run_id: int
    decision: str
    by: dict[str, str] | None
    decided_at: datetime


def _pending(run_id: int) -> tuple[Approval, str]:
    """The run's approval that waits and who started the run, or the reason (404, 409) there
    is none."""
    run = Run.objects.filter(pk=run_id).values_list("status", "caller").first()
    if run is None:
        raise DecisionError(404, f"No run {run_id}.")
    status, started_by = run
    approval = Approval.objects.filter(run_id=run_id).defer("state").order_by("-index").first()
    if status == Run.Status.WAITING and approval is not None and not approval.decision:
        return approval, started_by
    raise DecisionError(409, _not_waiting(run_id, status, approval))


def _not_waiting(run_id: int, status: str, approval: Approval | None) -> str:
    if approval is None:
        return f"Run {run_id} is {status}: it has no approval node to decide."
    if approval.decision == Approval.Decision.TIMEOUT:
        return (
            f"Run {run_id} is not waiting any more: its approval at node {approval.node_id!r} "
            f"timed out at {approval.decided_at:%Y-%m-%d %H:%M:%S} UTC."
        )
    if approval.decision:
        by = approval.decided_by or {}
        return (
            f"Run {run_id} was already decided: {approval.decision} by "
            f"{by.get('name') or by.get('id') or 'someone'} ({by.get('kind', '?')}) at "
            f"{approval.decided_at:%Y-%m-%d %H:%M:%S} UTC."
        )
    return f"Run {run_id} is {status}, not waiting for a decision."


def _checked_form(approval: Approval, form: Any, decision: str) -> dict[str, Any]:
    schema = approval.form
    if schema is not None and decision == Approval.Decision.REJECTED:
        # A rejection may say why in the form, but need not fill in what an approval needs.
        schema = {**schema, "required": []}
    if form in (None, {}):
        form = {}
    if not isinstance(form, dict):
        raise DecisionError(400, f"`form` must be an object, not {type(form).__name__}.")
    if schema is None:
        if form:
            raise DecisionError(
                400, f"Node {approval.node_id!r} asks for no form: send the decision without one."
            )
        return {}
    problems = form_value_problems(schema, form)
    if problems:
        raise DecisionError(400, "The form does not match the node's form: " + "; ".join(problems))
    return form


def decide(
    run_id: int,
    decision: str,
    decider: Decider,
    *,
    comment: str = "",
    form: Any = None,
) -> Decided:
    """Decide the run waiting at its approval node, and send it on. Raises `DecisionError`
    (nothing changed) for a run that does not exist or does not wait, an unknown decision,
    a decider who may not decide it, or form content that does not match the node's form."""
    approval, started_by = _pending(run_id)
    allowed = (Approval.Decision.TIMEOUT,) if decider.kind == "timer" else PEOPLE_DECISIONS
    if decision not in allowed:
        raise DecisionError(
            400,
            f"Unknown decision {decision!r}: send "
            + " or ".join(repr(str(each)) for each in allowed)
            + ".",
        )
    if not isinstance(comment, str) or len(comment) > MAX_COMMENT_CHARS:
        raise DecisionError(
            400, f"`comment` must be text of at most {MAX_COMMENT_CHARS} characters."
        )
    now = timezone.now()
    if decider.kind != "timer":
        _may_decide(approval, decider, started_by)
        values = _checked_form(approval, form, decision)
        if approval.timeout_at is not None and approval.timeout_at <= now:
            # Its time has come, whether or not a timer has fired it yet: the timeout wins.
            timeout_fire(run_id)
            raise DecisionError(409, _not_waiting(run_id, Run.Status.RUNNING, _reread(approval)))
    else:
        values = {}
    _take(approval, decision, decider, comment, values, now)
    go_on(run_id)
    return Decided(run_id, decision, decider.as_json(), now)


def _reread(approval: Approval) -> Approval:
    return Approval.objects.defer("state").get(pk=approval.pk)


def _may_decide(approval: Approval, decider: Decider, started_by: str) -> None:
    if approval.approvers == "caller" and decider.kind != "client":
        raise DecisionError(
            403,
            f"Run {approval.run_id} waits for its caller's answer (node {approval.node_id!r} "
            "has approvers: caller): only the client that called it decides. Cancel the run "
            "to stop it.",
        )
    if approval.approvers == "reviewers" and decider.kind == "client":
        raise DecisionError(403, f"Run {approval.run_id} waits for reviewers, not for its caller.")
    if (
        decider.kind != "client"
        and not settings.APPROVAL_ALLOW_SELF_DECISION
        and started_by
        and _started_by_decider(started_by, decider)
    ):
        raise DecisionError(
            403,
            f"Run {approval.run_id} was started by {started_by}, who may not also decide it "
            "(separation of duties): another reviewer must. An operator may allow it with "
            "APPROVAL_ALLOW_SELF_DECISION=true.",
        )


def _started_by_decider(started_by: str, decider: Decider) -> bool:
    """Whether the run's starter is the decider: one of its actors, or a client connected with
    OAuth for a user who is (the person decides in the admin, or with a key of theirs)."""
    return started_by in decider.actors or oauth_actor_user(started_by) in decider.actors


def _take(
    approval: Approval,
    decision: str,
    decider: Decider,
    comment: str,
    values: dict[str, Any],
    now: datetime,
) -> None:
    """Take the decision, if nobody took one first (then 409 naming them)."""
    with transaction.atomic():
        if not Run.objects.filter(pk=approval.run_id, status=Run.Status.WAITING).update(
            **going_on_fields(now)
        ):
            status = Run.objects.values_list("status", flat=True).get(pk=approval.run_id)
            raise DecisionError(409, _not_waiting(approval.run_id, status, _reread(approval)))
        Approval.objects.filter(pk=approval.pk).update(
            decision=decision,
            decided_at=now,
            decided_by=decider.as_json(),
            comment=comment,
            form_values=values,
        )
    approval.decision, approval.decided_at = decision, now
    approval.decided_by, approval.comment = decider.as_json(), comment
    audit_record(
        actor=decider.id or decider.name,
        action=AuditEvent.Action.DECIDED,
        target=approval,
        fields=["decision", "comment", "form_values"] if values else ["decision", "comment"],
    )
    telemetry.decision_taken(decision, decider.kind)
    logger.info("Run %s decided %s by %s", approval.run_id, decision, decider.kind)


def timeout_fire(run_id: int) -> Decided | None:
    """Decide a run whose approval's timeout is due: `timeout`; None when something else
    decided it first (or it was cancelled)."""
    try:
        return decide(run_id, Approval.Decision.TIMEOUT, TIMER)
    except DecisionError:
        return None
