from django.apps import AppConfig


class GraphsConfig(AppConfig):
    """Workflow graphs, their versions, runs and node executions."""

    name = "graphs"
