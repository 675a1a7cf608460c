"""The audit trail: who changed which node spec, workflow, provider or API key, and when.

Admin pages (through `nodespecs.admin.audit.AuditedAdmin`) and management commands call
`audit_record` after a change, or `audit_report` for a bulk change; the services that check
a `Caller`'s rights (`provider_save`, `graph_import`) record their changes themselves.
Events hold field names, never values: a provider's secrets and an API key's secret never
reach the trail.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from django.db import models

from nodespecs.models import AuditEvent, NodeSpec, Provider
from nodespecs.reports import ChangeReport, RefreshReport

Action = AuditEvent.Action
ModelT = TypeVar("ModelT", bound=models.Model)


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
