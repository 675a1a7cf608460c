from django.apps import AppConfig


class GraphsConfig(AppConfig):
    """Workflow graphs, their versions, runs and node executions."""

    name = "graphs"

    def ready(self) -> None:
        """Install the OpenTelemetry exporters the `OTEL_*` environment asks for, in every
        process that loads the apps (web servers, Celery workers, commands)."""
        from graphs.execution import tracing

        tracing.configure()
