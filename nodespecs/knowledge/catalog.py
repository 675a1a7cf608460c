"""The built-in catalog: spec files shipped in `nodespecs/catalog/`, loaded idempotently."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from nodespecs.knowledge.specformat import (
    SafeLoader,
    SpecDocument,
    SpecFormatError,
    dump_spec_document,
    parse_spec_document,
)
from nodespecs.knowledge.specs import spec_save
from nodespecs.models import NodeSpec
from nodespecs.reports import ChangeReport

CATALOG_DIR = Path(__file__).resolve().parent.parent / "catalog"


def document_digest(document: dict[str, Any]) -> str:
    """A stable digest of a spec document's content."""
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def read_builtin_catalog(directory: Path = CATALOG_DIR) -> list[SpecDocument]:
    """Parse every catalog file; a broken file fails loudly with its name and the field."""
    documents: list[SpecDocument] = []
    seen: dict[tuple[str, str], str] = {}
    for path in sorted(directory.glob("*.yaml")):
        entries = yaml.load(path.read_text(encoding="utf-8"), Loader=SafeLoader) or []
        for position, raw in enumerate(entries, start=1):
            try:
                document = parse_spec_document(raw)
            except SpecFormatError as exc:
                raise SpecFormatError(
                    {
                        f"{path.name} entry {position}.{key}": msg
                        for key, msg in exc.problems.items()
                    }
                ) from None
            if document.key() in seen:
                name = "/".join(document.key())
                raise SpecFormatError(
                    {path.name: f"{name} is also defined in {seen[document.key()]}"}
                )
            seen[document.key()] = path.name
            documents.append(document)
    return documents


@dataclass
class LoadReport(ChangeReport):
    skipped: dict[str, str] = field(default_factory=dict)


def load_builtin_catalog(*, force: bool = False) -> LoadReport:
    """Create or update the built-in specs.

    A spec whose content differs from the catalog entry it was last loaded from has been
    edited by an author (or was created by one); it is skipped unless `force` is true.
    """
    report = LoadReport()
    for parsed in read_builtin_catalog():
        document = dump_spec_document(parsed)
        digest = document_digest(document)
        name = f"{parsed.node_type}/{parsed.subtype}"
        spec = NodeSpec.objects.filter(node_type=parsed.node_type, subtype=parsed.subtype).first()
        if spec is None:
            spec = NodeSpec(source=NodeSpec.Source.BUILTIN)
            report.created.append(name)
        elif spec.builtin_digest == digest and document_digest(spec.document()) == digest:
            report.unchanged.append(name)
            continue
        elif not force and (
            spec.source != NodeSpec.Source.BUILTIN
            or document_digest(spec.document()) != spec.builtin_digest
        ):
            reason = (
                "created by an author"
                if spec.source != NodeSpec.Source.BUILTIN
                else "edited locally"
            )
            report.skipped[name] = f"{reason}; run with --force to overwrite it"
            continue
        else:
            report.updated.append(name)
        spec.set_document(document)
        spec.source = NodeSpec.Source.BUILTIN
        spec.builtin_digest = digest
        spec_save(spec=spec, comment="Loaded from the built-in catalog")
    return report
