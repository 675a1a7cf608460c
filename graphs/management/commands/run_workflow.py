"""`python manage.py run_workflow NAME --args JSON`: run a workflow and print its result."""

import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from graphs.execution.runs import RunRequest, WorkflowCallError, workflow_call


class Command(BaseCommand):
    help = (
        "Run a workflow with JSON arguments, record the run like any other, and print the "
        "result and the run id. Exits with status 1 when the run fails."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="The workflow (tool) name.")
        parser.add_argument(
            "--args",
            dest="arguments",
            default="{}",
            help="The arguments as a JSON object, e.g. '{\"n\": 3}'.",
        )

    def handle(self, *args: object, name: str, arguments: str, **options: object) -> None:
        try:
            arguments = json.loads(arguments)
        except ValueError as exc:
            raise CommandError(f"--args is not JSON: {exc}") from None
        try:
            outcome = workflow_call(RunRequest(name=name, arguments=arguments, caller="manage.py"))
        except WorkflowCallError as exc:
            raise CommandError(str(exc)) from None
        if not outcome.succeeded:
            where = f" at node {outcome.error_node_id}" if outcome.error_node_id else ""
            raise CommandError(f"Run {outcome.run_id} {outcome.status}{where}: {outcome.error}")
        self.stdout.write(json.dumps(outcome.result, indent=2, ensure_ascii=False))
        self.stdout.write(f"run {outcome.run_id} {outcome.status}")
