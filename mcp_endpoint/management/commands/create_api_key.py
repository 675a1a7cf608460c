"""`python manage.py create_api_key --name NAME [--scopes SCOPE,...] [--owner USERNAME]`: prints
the key last."""

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from mcp_endpoint.access.keys import InvalidScopes, api_key_create
from mcp_endpoint.models import Scope
from nodespecs.audit import Action, audit_record
from nodespecs.callers import actor_command


class Command(BaseCommand):
    help = "Create an API key and print it (alone, on the last line). It cannot be shown again."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True, help="Who or what uses the key.")
        parser.add_argument(
            "--scopes",
            default=",".join(Scope.values),
            help=f"Comma-separated scopes (default: all): {', '.join(Scope.values)}.",
        )
        parser.add_argument(
            "--owner",
            help="The username the key acts for: it owns the workflow groups the key creates, "
            "and may change those its user owns (default: no owner; the key owns what it "
            "creates).",
        )
        parser.add_argument("--expires-in-days", type=int, help="Expire the key after N days.")
        parser.add_argument("--rate-limit", type=int, help="Requests per minute for this key.")

    def handle(self, *args: object, **options: object) -> None:
        scopes = [s.strip() for s in str(options["scopes"]).split(",") if s.strip()]
        days = options.get("expires_in_days")
        rate_limit = options.get("rate_limit")
        owner = None
        if options.get("owner"):
            username = str(options["owner"])
            users = get_user_model().objects
            owner = users.filter(**{get_user_model().USERNAME_FIELD: username}).first()
            if owner is None:
                raise CommandError(f"No user named {username!r}: create the user first.")
        try:
            key, secret = api_key_create(
                name=str(options["name"]),
                scopes=scopes,
                owner=owner,
                expires_at=timezone.now() + timedelta(days=days) if isinstance(days, int) else None,
                rate_limit_per_minute=rate_limit if isinstance(rate_limit, int) else None,
            )
        except InvalidScopes as exc:
            raise CommandError(str(exc)) from None
        audit_record(actor=actor_command("create_api_key"), action=Action.CREATED, target=key)
        self.stderr.write(
            f"Created API key {key.prefix} ({key.name}) with scopes {', '.join(key.scopes)}. "
            "Store it now: it is not shown again."
        )
        self.stdout.write(secret)
