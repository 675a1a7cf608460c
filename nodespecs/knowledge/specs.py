"""Writes to the catalog: every change to a spec goes through here, so each one is validated
and leaves a revision, whether it comes from the admin, a YAML import or the catalog loader."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction

from nodespecs.knowledge.specformat import (
    SafeDumper,
    SafeLoader,
    SpecFormatError,
    dump_spec_document,
    parse_spec_document,
)
from nodespecs.models import NodeSpec, NodeSpecRevision
from nodespecs.reports import ChangeReport


@transaction.atomic
def spec_save(
    *, spec: NodeSpec, author: AbstractBaseUser | None = None, comment: str = ""
) -> NodeSpecRevision:
    """Validate and save a spec, and record a revision of what was saved.

    Raises `django.core.exceptions.ValidationError` keyed by field when the content is invalid.
    """
    spec.full_clean()
    spec.save()
    return NodeSpecRevision.objects.create(
        spec=spec,
        number=NodeSpecRevision.next_number(spec.revisions),
        document=spec.document(),
        **NodeSpecRevision.authored(author, comment),
    )


def spec_restore(
    *, revision: NodeSpecRevision, author: AbstractBaseUser | None = None
) -> NodeSpecRevision:
    """Put a spec back to the content of one of its revisions (recorded as a new revision)."""
    spec = revision.spec
    spec.set_document(revision.document)
    return spec_save(spec=spec, author=author, comment=f"Restored revision {revision.number}")


class SpecImportError(ValueError):
    """A YAML import could not be read; the message says where and why."""


@dataclass
class ImportReport(ChangeReport):
    failed: dict[str, str] = field(default_factory=dict)


def specs_from_yaml(text: str) -> list[dict[str, Any]]:
    """Read one spec, a list of specs, or a mapping with a `specs` list from YAML text."""
    try:
        data = yaml.load(text, Loader=SafeLoader)
    except yaml.YAMLError as exc:
        raise SpecImportError(f"The file is not valid YAML: {exc}") from None
    if isinstance(data, dict) and isinstance(data.get("specs"), list):
        data = data["specs"]
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not data:
        raise SpecImportError(
            "Expected a spec (a mapping with node_type and subtype) or a list of specs."
        )
    for position, item in enumerate(data, start=1):
        if not isinstance(item, dict):
            raise SpecImportError(
                f"Item {position} is a {type(item).__name__}, not a spec mapping."
            )
    return data


def specs_to_yaml(specs: list[NodeSpec]) -> str:
    """Export specs as a YAML list that `specs_import` reads back unchanged."""
    documents = [spec.document() for spec in specs]
    return yaml.dump(documents, Dumper=SafeDumper, sort_keys=False, allow_unicode=True, width=100)


def _label(raw: dict[str, Any], position: int) -> str:
    node_type = raw.get("node_type") or raw.get("type") or "?"
    return f"#{position} {node_type}/{raw.get('subtype', '?')}"


def specs_import(
    *,
    documents: list[dict[str, Any]],
    author: AbstractBaseUser | None = None,
    source: str = NodeSpec.Source.CUSTOM,
) -> ImportReport:
    """Create or update specs from documents (unified or legacy format).

    Each document is validated on its own: a bad one is reported in `failed` and the
    others are still imported.
    """
    report = ImportReport()
    for position, raw in enumerate(documents, start=1):
        try:
            parsed = parse_spec_document(raw)
        except SpecFormatError as exc:
            report.failed[_label(raw, position)] = str(exc)
            continue
        document = dump_spec_document(parsed)
        name = f"{parsed.node_type}/{parsed.subtype}"
        spec = NodeSpec.objects.filter(node_type=parsed.node_type, subtype=parsed.subtype).first()
        if spec is not None and spec.document() == document:
            report.unchanged.append(name)
            continue
        created = spec is None
        if spec is None:
            spec = NodeSpec(source=source)
        spec.set_document(document)
        try:
            spec_save(spec=spec, author=author, comment="Imported from YAML")
        except ValidationError as exc:
            report.failed[name] = "; ".join(exc.messages)
            continue
        (report.created if created else report.updated).append(name)
    return report
