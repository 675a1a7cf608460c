from django.apps import AppConfig


class NodespecsConfig(AppConfig):
    """The node spec catalog and the knowledge service that answers agents about it."""

    name = "nodespecs"
    verbose_name = "Node catalog"

    def ready(self) -> None:
        from nodespecs import signals  # noqa: F401  (connects catalog cache invalidation)
