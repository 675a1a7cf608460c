"""Keep the knowledge registry in step with the catalog tables, and the providers' snapshot
with the providers."""

from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from nodespecs.knowledge.registry import catalog_changed
from nodespecs.models import NodeSpec, Provider
from nodespecs.providers.connections import providers_changed


@receiver([post_save, post_delete], sender=NodeSpec)
def _spec_changed(**kwargs: object) -> None:
    transaction.on_commit(catalog_changed)


@receiver([post_save, post_delete], sender=Provider)
def _provider_changed(**kwargs: object) -> None:
    providers_changed()
