"""`python manage.py load_node_specs [--force]`: load the built-in catalog."""

from django.core.management.base import BaseCommand, CommandError, CommandParser

from nodespecs.audit import audit_report, specs_named
from nodespecs.callers import actor_command
from nodespecs.knowledge.catalog import load_builtin_catalog
from nodespecs.knowledge.specformat import SpecFormatError


class Command(BaseCommand):
    help = (
        "Create or update the built-in node specs from nodespecs/catalog/. Specs an author "
        "edited are left alone unless --force is given."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--force",
            action="store_true",
            help="Overwrite specs that were edited locally (their revisions keep the edits).",
        )

    def handle(
        self, *args: object, force: bool = False, verbosity: int = 1, **options: object
    ) -> None:
        try:
            report = load_builtin_catalog(force=force)
        except SpecFormatError as exc:
            raise CommandError(f"The built-in catalog is invalid: {exc}") from None
        audit_report(
            actor=actor_command("load_node_specs"),
            report=report,
            objects=specs_named(report.created + report.updated),
        )
        verbose = verbosity > 1
        for label, names in (("created", report.created), ("updated", report.updated)):
            if names and (verbose or len(names) <= 10):
                self.stdout.write(f"{label}: {', '.join(names)}")
        for name, reason in report.skipped.items():
            self.stdout.write(self.style.WARNING(f"skipped {name}: {reason}"))
        self.stdout.write(
            self.style.SUCCESS(
                f"Node specs: {len(report.created)} created, {len(report.updated)} updated, "
                f"{len(report.unchanged)} unchanged, {len(report.skipped)} skipped."
            )
        )
