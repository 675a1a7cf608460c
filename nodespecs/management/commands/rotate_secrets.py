"""`python manage.py rotate_secrets`: re-encrypt every provider's secrets with the first key."""

from django.core.management.base import BaseCommand, CommandError

from nodespecs.audit import Action, audit_record
from nodespecs.callers import actor_command
from nodespecs.models import Provider
from nodespecs.secrets import SecretsUnreadable, uses_derived_key


class Command(BaseCommand):
    help = (
        "Re-encrypt the env and headers of every provider with the first key of "
        "SWITCHYARD_SECRETS_KEY. To rotate: put the new key first, keep the old one after it, "
        "run this, then remove the old key. Exits with status 1 if any provider's secrets "
        "could not be decrypted (the others are still re-encrypted)."
    )

    def handle(self, *args: object, **options: object) -> None:
        if uses_derived_key():
            self.stdout.write(
                self.style.WARNING(
                    "SWITCHYARD_SECRETS_KEY is not set: re-encrypting with the key derived from "
                    "SECRET_KEY."
                )
            )
        failures = []
        providers = list(Provider.objects.only("pk", "name", "env", "headers"))
        for provider in providers:
            try:
                values = {"env": dict(provider.env), "headers": dict(provider.headers)}
            except SecretsUnreadable as exc:
                failures.append(str(exc))
                self.stdout.write(self.style.ERROR(str(exc)))
                continue
            # update(), not save(): the settings did not change, so updated_at stays.
            Provider.objects.filter(pk=provider.pk).update(**values)
            audit_record(
                actor=actor_command("rotate_secrets"),
                action=Action.REENCRYPTED,
                target=provider,
                fields=values,
            )
        done = len(providers) - len(failures)
        self.stdout.write(self.style.SUCCESS(f"Re-encrypted the secrets of {done} provider(s)."))
        if failures:
            raise CommandError(
                f"{len(failures)} of {len(providers)} providers could not be decrypted: add the "
                "key they were encrypted with to SWITCHYARD_SECRETS_KEY (after the new one) and "
                "run rotate_secrets again."
            )
