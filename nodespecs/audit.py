"""The audit trail: who changed which node spec, workflow, provider or API key, and when.

Admin pages (through `nodespecs.admin.audit.AuditedAdmin`) and management commands call
`audit_record` after a change, or `audit_report` for a bulk change; the services that check
a `Caller`'s rights (`provider_save`, `graph_import`) record their changes themselves.
Events hold field names, never values: a provider's secrets and an API key's secret never
reach the trail.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import models

from nodespecs.models import AuditEvent, NodeSpec, Provider
from nodespecs.reports import ChangeReport, RefreshReport

Action = AuditEvent.Action
ModelT = TypeVar("ModelT", bound=models.Model)


def actor_user(user: AbstractBaseUser) -> str:
    """How a signed-in user is named in the trail."""
    return user.get_username()


def actor_command(name: str) -> str:
    """How a management command is named in the trail."""
    return f"command:{name}"


@dataclass(frozen=True)
class Caller:
    """Who asks a service for a change, passed to it explicitly (never read from a
    thread-local): `actor` names them in the trail, `may_start_processes` says whether they
    may make this server start a process (`nodespecs.downstream.process_rights`), and `user` is the
    signed-in user, if any, who authors revisions.

    An API caller (`actor` "key:<prefix>") also carries its key's `scopes` and the user the
    key acts for (`key_owner_id`, `key_owner_name`); people in the admin and operators'
    commands carry `scopes` None: their rights are Django's permissions and the host's."""

    actor: str
    may_start_processes: bool = False
    user: AbstractBaseUser | None = None
    scopes: frozenset[str] | None = None
    key_owner_id: int | None = None
    key_owner_name: str = ""
    # The other actors whose runs count as this caller's own (every key of the user a key
    # acts for), where that matters (test_workflow's `from_run`, filled by
    # mcp_endpoint.access.keys.with_same_owner_actors); empty: only `actor` itself.
    same_owner_actors: frozenset[str] = frozenset()

    @property
    def trail_name(self) -> str:
        """How the trail names this caller: `actor`, with the user an API key acts for."""
        return f"{self.actor} ({self.key_owner_name})" if self.key_owner_name else self.actor

    @property
    def is_api_caller(self) -> bool:
        """True for a caller through an API key (MCP, REST), whose rights are its scopes."""
        return self.scopes is not None

    @property
    def user_id(self) -> int | None:
        """The user this caller acts for: the signed-in user, or an API key's owner."""
        if self.user is not None:
            return self.user.pk
        return self.key_owner_id

    def has_scope(self, scope: str) -> bool:
        """Whether an API caller's key grants `scope`; people and operators always do (their
        rights are checked elsewhere)."""
        return self.scopes is None or scope in self.scopes


def caller_user(user: AbstractBaseUser) -> Caller:
    """A signed-in user: only an active superuser may start processes."""
    return Caller(
        actor=actor_user(user),
        # getattr: a user model without PermissionsMixin has no superusers at all.
        may_start_processes=bool(user.is_active and getattr(user, "is_superuser", False)),
        user=user,
    )


def caller_command(name: str) -> Caller:
    """An operator running a management command: they can already run any process."""
    return Caller(actor=actor_command(name), may_start_processes=True)


def _event(*, actor: str, action: str, target: models.Model, fields: Iterable[str]) -> AuditEvent:
    return AuditEvent(
        actor=actor[:150],
        action=action,
        object_type=target._meta.label_lower,
        object_id=str(target.pk),
        object_label=str(target)[:200],
        fields=sorted(fields),
    )


def audit_record(
    *, actor: str, action: str, target: models.Model, fields: Iterable[str] = ()
) -> AuditEvent:
    """Record that `actor` did `action` to `target`, changing the named `fields`."""
    event = _event(actor=actor, action=action, target=target, fields=fields)
    event.save()
    return event


def audit_records(
    *, actor: str, action: str, targets: Iterable[models.Model], fields: Iterable[str] = ()
) -> list[AuditEvent]:
    """`audit_record` for several objects at once (one query)."""
    names = list(fields)
    return AuditEvent.objects.bulk_create(
        [_event(actor=actor, action=action, target=target, fields=names) for target in targets]
    )


def audit_report(
    *,
    actor: str,
    report: ChangeReport,
    objects: Iterable[ModelT],
    name_of: Callable[[ModelT], str] = str,
) -> list[AuditEvent]:
    """Record the objects a bulk change report names as created or updated.

    `objects` holds them (it may hold more); `name_of` gives the name the report uses.
    """
    actions = dict.fromkeys(report.created, Action.CREATED) | dict.fromkeys(
        report.updated, Action.CHANGED
    )
    targets = [target for target in objects if name_of(target) in actions]
    return AuditEvent.objects.bulk_create(
        [
            _event(actor=actor, action=actions[name_of(target)], target=target, fields=())
            for target in targets
        ]
    )


def specs_named(names: Iterable[str]) -> models.QuerySet[NodeSpec]:
    """The specs among `names` ("NODE_TYPE/SUBTYPE", as reports name them), and maybe a few
    more of the same subtypes."""
    return NodeSpec.objects.filter(subtype__in={name.partition("/")[2] for name in names})


def audit_refresh(*, actor: str, provider: Provider, report: RefreshReport) -> None:
    """Record a provider refresh and the tool specs it created or updated."""
    audit_record(actor=actor, action=Action.REFRESHED, target=provider)
    audit_report(
        actor=actor,
        report=report,
        objects=provider.specs.all(),
        name_of=lambda spec: spec.display_name,
    )
