"""`python manage.py setup_demo`: a demo admin account and a fresh demo API key."""

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from mcp_endpoint.keys import api_key_create, api_key_revoke
from mcp_endpoint.models import ApiKey, Scope
from nodespecs.audit import Action, actor_command, audit_record

DEMO_KEY_NAME = "demo"


class Command(BaseCommand):
    help = (
        "Create a demo superuser (once) and a demo API key with every scope; the previous demo "
        "key is revoked, so only the one printed last works."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="admin")

    def handle(self, *args: object, username: str = "admin", **options: object) -> None:
        users = get_user_model()
        user = users.objects.filter(username=username).first()
        if user is None:
            password = secrets.token_urlsafe(12)
            user = users.objects.create_superuser(username, password=password)
            self.stdout.write(
                self.style.SUCCESS(f"Demo admin: username {username}, password {password}")
            )
        else:
            self.stdout.write(
                f"Demo admin '{username}' exists (reset its password with: "
                f"python manage.py changepassword {username})."
            )
        actor = actor_command("setup_demo")
        for old in ApiKey.objects.filter(name=DEMO_KEY_NAME, revoked_at__isnull=True):
            api_key_revoke(key=old)
            audit_record(actor=actor, action=Action.REVOKED, target=old)
        key, secret = api_key_create(name=DEMO_KEY_NAME, scopes=list(Scope.values), owner=user)
        audit_record(actor=actor, action=Action.CREATED, target=key)
        self.stdout.write(self.style.SUCCESS(f"Demo API key (all scopes): {secret}"))
        # Where to go once the server runs (the README's start command serves these).
        self.stdout.write(
            "Once the server runs: the admin at http://127.0.0.1:8000/admin/, the history at "
            "/runs/, MCP at /mcp (legacy SSE at /sse), REST docs at /api/v1/docs."
        )
        self.stdout.write(
            "Try: curl -s http://127.0.0.1:8000/mcp -H 'Content-Type: application/json' "
            f"-H 'Authorization: Bearer {secret}' -H 'MCP-Protocol-Version: 2026-07-28' "
            '-H \'Mcp-Method: tools/list\' -d \'{"jsonrpc":"2.0","id":1,"method":"tools/list",'
            '"params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
            '"io.modelcontextprotocol/clientCapabilities":{}}}}\''
        )
