"""`python manage.py export_graph NAME`: a workflow group (or one workflow) as graph YAML."""

from django.core.management.base import BaseCommand, CommandError, CommandParser

from graphs.authoring.files import GraphFileError, graph_export
from graphs.models import Workflow


class Command(BaseCommand):
    help = (
        "Print a workflow group (the `server.name` of the file it came from) or a single "
        "workflow as graph YAML that import_graph reads back to the same workflows. "
        "Provider headers and env are written as stored: treat the output as a secret."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", nargs="?", help="A group or workflow name.")
        parser.add_argument(
            "--list",
            action="store_true",
            help="List groups and workflows, with the endpoint each group is served at.",
        )

    def handle(self, *args: object, name: str | None, **options: object) -> None:
        if options["list"] or name is None:
            workflows = Workflow.objects.select_related("group").order_by("group__name", "name")
            for workflow in workflows:
                state = "" if workflow.enabled else " (disabled)"
                served = f"  at /mcp/{workflow.group.slug}"
                self.stdout.write(f"{workflow.group.name}/{workflow.name}{state}{served}")
            return
        try:
            self.stdout.write(graph_export(name=name), ending="")
        except GraphFileError as exc:
            raise CommandError(str(exc)) from None
