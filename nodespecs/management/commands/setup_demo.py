"""`python manage.py setup_demo`: a demo staff account for a local start."""

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = "Create a demo superuser for the admin (once) and print how to sign in."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="admin")

    def handle(self, *args: object, username: str = "admin", **options: object) -> None:
        users = get_user_model()
        if users.objects.filter(username=username).exists():
            self.stdout.write(
                f"Demo admin '{username}' already exists (its password was printed when it was "
                f"created; reset it with: python manage.py changepassword {username})."
            )
            return
        password = secrets.token_urlsafe(12)
        users.objects.create_superuser(username, password=password)
        self.stdout.write(
            self.style.SUCCESS(f"Demo admin created: username {username}, password {password}")
        )
