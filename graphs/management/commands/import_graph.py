"""`python manage.py import_graph FILE.yaml [...] [--keep]`: create or update workflows from
graph files, and retire those of each file's group that it no longer defines."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from graphs.authoring.files import GraphFileError, graph_import
from nodespecs.callers import caller_command
from nodespecs.secrets import SecretsUnreadable

# An operator at the shell: may add stdio servers (they can run any process anyway). The
# import records its workflows and new providers in the audit trail under this name.
CALLER = caller_command("import_graph")


class Command(BaseCommand):
    help = (
        "Import graph files in the mcpGraph YAML format: each tool becomes a workflow served "
        "over MCP, each mcpServers entry a provider. Relative paths in a server's arguments "
        "are taken from the file's folder. The workflows of the file's group that it no longer "
        "defines are retired: no longer served, their versions and runs kept (--keep keeps "
        "serving them). Reports what was created, updated, unchanged or retired."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("files", nargs="+", type=Path, help="Graph YAML files.")
        parser.add_argument(
            "--keep",
            action="store_true",
            help="Keep serving the workflows of the file's group that the file does not define "
            "(for a file that holds only some of its group, such as one workflow's export).",
        )

    def handle(self, *args: object, files: list[Path], keep: bool, **options: object) -> None:
        for path in files:
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise CommandError(f"Cannot read {path}: {exc}") from None
            try:
                report = graph_import(text=text, base_dir=path.parent, caller=CALLER, keep=keep)
            except (GraphFileError, SecretsUnreadable) as exc:
                raise CommandError(f"{path} was not imported (nothing changed):\n{exc}") from None
            for label, names in (
                ("created", report.created),
                ("updated", report.updated),
                ("unchanged", report.unchanged),
                ("retired", list(report.retired)),
                ("kept, though not in the file", list(report.kept)),
            ):
                if names:
                    self.stdout.write(f"{label}: {', '.join(names)}")
            for server, provider in report.providers.items():
                self.stdout.write(f"server {server} → provider {provider}")
            self.stdout.write(self.style.SUCCESS(f"{path}: {report.summary()}."))
