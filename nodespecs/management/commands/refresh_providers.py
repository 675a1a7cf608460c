"""`python manage.py refresh_providers [NAME ...]`: turn providers' tools into node specs."""

from django.core.management.base import BaseCommand, CommandError, CommandParser

from nodespecs.audit import audit_refresh
from nodespecs.callers import actor_command
from nodespecs.models import Provider
from nodespecs.providers.lifecycle import ProviderRefreshError, provider_refresh

ACTOR = actor_command("refresh_providers")


class Command(BaseCommand):
    help = (
        "List the tools of each enabled provider (or of the named ones) and create, update or "
        "mark unavailable their TOOL node specs. Exits with status 1 if any provider failed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("names", nargs="*", metavar="NAME", help="provider names")

    def handle(self, *args: object, names: list[str], **options: object) -> None:
        if names:
            providers = list(Provider.objects.filter(name__in=names))
            unknown = sorted(set(names) - {provider.name for provider in providers})
            if unknown:
                known = ", ".join(Provider.objects.values_list("name", flat=True)) or "none"
                raise CommandError(f"No provider named {', '.join(unknown)}. Providers: {known}.")
        else:
            # Servers builders declared in their workflows never enter the catalog.
            providers = list(Provider.objects.filter(enabled=True, declared_by=""))
            if not providers:
                self.stdout.write("No enabled providers: add one in the admin first.")
                return
        failures = 0
        for provider in providers:
            try:
                report = provider_refresh(provider=provider)
            except ProviderRefreshError as exc:
                failures += 1
                self.stdout.write(self.style.ERROR(f"{provider.name}: failed: {exc}"))
                continue
            audit_refresh(actor=ACTOR, provider=provider, report=report)
            style = self.style.WARNING if report.failed else self.style.SUCCESS
            self.stdout.write(style(f"{provider.name}: {report.summary()}"))
            for name, reason in report.failed.items():
                self.stdout.write(self.style.WARNING(f"  {name} {reason}"))
        if failures:
            raise CommandError(f"{failures} of {len(providers)} providers failed to refresh.")
