"""`python manage.py import_graph FILE.yaml [...]`: create or update workflows from graph files."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from graphs.files import GraphFileError, graph_import
from nodespecs.audit import caller_command
from nodespecs.secrets import SecretsUnreadable

# An operator at the shell: may add stdio servers (they can run any process anyway). The
# import records its workflows and new providers in the audit trail under this name.
CALLER = caller_command("import_graph")


class Command(BaseCommand):
    help = (
        "Import graph files in the mcpGraph YAML format: each tool becomes a workflow served "
        "over MCP, each mcpServers entry a provider. Relative paths in a server's arguments "
        "are taken from the file's folder. Reports what was created, updated or unchanged."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("files", nargs="+", type=Path, help="Graph YAML files.")

    def handle(self, *args: object, files: list[Path], **options: object) -> None:
        for path in files:
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise CommandError(f"Cannot read {path}: {exc}") from None
            try:
                report = graph_import(text=text, base_dir=path.parent, caller=CALLER)
            except (GraphFileError, SecretsUnreadable) as exc:
                raise CommandError(f"{path} was not imported (nothing changed):\n{exc}") from None
            for label, names in (
                ("created", report.created),
                ("updated", report.updated),
                ("unchanged", report.unchanged),
            ):
                if names:
                    self.stdout.write(f"{label}: {', '.join(names)}")
            for server, provider in report.providers.items():
                self.stdout.write(f"server {server} → provider {provider}")
            self.stdout.write(self.style.SUCCESS(f"{path}: {report.summary()}."))
