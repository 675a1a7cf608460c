"""What a bulk change did (an import, a catalog load, a provider refresh), name by name."""

from __future__ import annotations

from dataclasses import dataclass, field, fields


@dataclass
class ChangeReport:
    """Names by outcome. Subclasses add outcomes as more list fields (always counted) and
    dict fields of name → reason (counted when not empty); a field with metadata
    `{"outcome": False}` is not an outcome."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """e.g. "3 created, 1 updated, 0 unchanged, 1 failed"."""
        parts = []
        for outcome in fields(self):
            if outcome.metadata.get("outcome") is False:
                continue
            value = getattr(self, outcome.name)
            if isinstance(value, list) or (isinstance(value, dict) and value):
                parts.append(f"{len(value)} {outcome.name}")
        return ", ".join(parts)


@dataclass
class RefreshReport(ChangeReport):
    """What a refresh did, by node name; every tool of the provider is in one list."""

    provider: str = ""
    unavailable: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
