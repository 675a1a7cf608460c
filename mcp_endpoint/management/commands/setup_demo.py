"""`python manage.py setup_demo`: a demo admin account, a fresh demo API key, and example
workflows to call (graphs/authoring/demo_graphs.py)."""

import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from graphs.authoring.demo_graphs import demo_graphs_install
from mcp_endpoint.access.keys import api_key_create, api_key_revoke
from mcp_endpoint.models import ApiKey, Scope
from nodespecs.audit import Action, audit_record
from nodespecs.callers import actor_command

DEMO_KEY_NAME = "demo"


class Command(BaseCommand):
    help = (
        "Create a demo superuser (once) and a demo API key with every scope; the previous demo "
        "key is revoked, so only the one printed last works. Import the example workflows "
        "(add_up_to, classify_number, and seed 003's count_files with a folder to count)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="admin")
        parser.add_argument(
            "--data-dir",
            type=Path,
            default=settings.BASE_DIR / "var" / "demo",
            help="Where count_files's folder is created (default: var/demo in the project).",
        )

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
        demo = demo_graphs_install(Path(str(options["data_dir"])))
        self.stdout.write(
            f"Example workflows: {'; '.join(demo.summaries)}. count_files counts the "
            f"files in {demo.counted} (its filesystem server runs with npx: it needs Node)."
        )
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
        self.stdout.write(
            f"Call a workflow: curl -s -H 'X-API-Key: {secret}' -H 'Content-Type: "
            "application/json' http://127.0.0.1:8000/api/v1/mcp/invoke -d '{\"name\": "
            '"add_up_to", "arguments": {"n": 10}}\''
        )
