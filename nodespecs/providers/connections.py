"""The providers as runs reach them: each one's name, whether it is enabled, and its
connection settings, in a per-process snapshot (nodespecs/snapshots.py).

A run that calls out needs its servers' providers; reading their rows on every run put a query
on the path of every such call. The snapshot is rebuilt when a provider changes: every save and
delete announces it (nodespecs/signals.py), so this process sees a disabled provider at its next
run, and other processes within a tenth of a second with a shared cache (within a second
without one, by the table's stamp).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from django.db.models import Count, Max

from nodespecs.downstream import client
from nodespecs.models import Provider
from nodespecs.snapshots import StampedSnapshot


@dataclass(frozen=True)
class ProviderConnection:
    """What a run needs of a provider."""

    name: str
    enabled: bool
    # Its pooled-connection settings, or why there are none (its secrets cannot be decrypted:
    # the run's call then fails saying so, as any unreachable server's does).
    settings: client.Connection | None
    problem: str = ""

    def connection(self) -> client.Connection:
        """The connection settings; raises `client.DownstreamError` saying why there are none."""
        if self.settings is None:
            raise client.DownstreamError(self.problem)
        return self.settings


def _connection_of(provider: Provider) -> ProviderConnection:
    try:
        settings = provider.connection()
    except client.DownstreamError as exc:
        return ProviderConnection(provider.name, provider.enabled, None, str(exc))
    return ProviderConnection(provider.name, provider.enabled, settings)


def _table_stamp() -> str:
    stamp = Provider.objects.aggregate(count=Count("id"), changed=Max("updated_at"))
    return f"{stamp['count']}:{stamp['changed']}"


def _build() -> dict[int, ProviderConnection]:
    return {provider.pk: _connection_of(provider) for provider in Provider.objects.all()}


# The cache key whose value changes with every announced change of the providers.
GENERATION_KEY = "nodespecs:providers-generation"
_snapshot = StampedSnapshot(GENERATION_KEY, _table_stamp, _build)


def providers_changed() -> None:
    """Tell every process that the providers changed, once the change is committed."""
    _snapshot.changed()


def provider_connections(ids: Collection[int]) -> dict[int, ProviderConnection]:
    """The providers of primary keys `ids` that exist, as they are now (may query: from a
    thread that may). One not in the snapshot (saved a moment ago, its announcement still
    on its way) is read from the table."""
    snapshot = _snapshot.get()
    found = {pk: snapshot[pk] for pk in ids if pk in snapshot}
    missing = [pk for pk in ids if pk not in found]
    if missing:
        read = Provider.objects.filter(pk__in=missing)
        found |= {provider.pk: _connection_of(provider) for provider in read}
    return found
