"""Keep the knowledge registry in step with the catalog tables."""

from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from nodespecs.knowledge.registry import catalog_changed
from nodespecs.models import NodeSpec


@receiver([post_save, post_delete], sender=NodeSpec)
def _spec_changed(**kwargs: object) -> None:
    transaction.on_commit(catalog_changed)
