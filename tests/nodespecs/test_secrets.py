"""Provider secrets: encrypted at rest, never rendered or logged, rotated, and a wrong key
explained (nodespecs/secrets.py)."""

from __future__ import annotations

import html
import io
import json
import logging
import sys

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse

from nodespecs.models import AuditEvent, Provider
from nodespecs.providers.lifecycle import ProviderRefreshError, provider_refresh
from nodespecs.secrets import SecretsUnreadable, decrypt_json
from tests.nodespecs.providers_helpers import servers  # noqa: F401
from tests.test_settings import PRODUCTION, start

ENV_SECRET = "env-secret-value-4242"
HEADER_SECRET = "Bearer header-secret-8686"
KEY_A, KEY_B, KEY_C = (Fernet.generate_key().decode() for _ in range(3))


@pytest.fixture
def key_a(settings):
    settings.SWITCHYARD_SECRETS_KEYS = [KEY_A]
    return settings


def raw_columns(provider: Provider) -> tuple[str, str]:
    """The env and headers columns as stored, read past the model."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT env, headers FROM nodespecs_provider WHERE id = %s", [provider.pk])
        return cursor.fetchone()


def make_provider(**fields) -> Provider:
    values = {
        "name": "web",
        "transport": "streamable_http",
        "url": "https://mcp.example.com/mcp",
        "env": {"API_TOKEN": ENV_SECRET},
        "headers": {"Authorization": HEADER_SECRET},
    }
    return Provider.objects.create(**(values | fields))


def test_the_database_holds_ciphertext_and_the_model_reads_the_values(db, key_a):
    provider = make_provider()

    env, headers = raw_columns(provider)
    assert ENV_SECRET not in env
    assert "header-secret" not in headers
    assert "API_TOKEN" not in env  # the names are encrypted too
    assert decrypt_json(env) == {"API_TOKEN": ENV_SECRET}
    reloaded = Provider.objects.get(pk=provider.pk)
    assert reloaded.env == {"API_TOKEN": ENV_SECRET}
    assert reloaded.headers == {"Authorization": HEADER_SECRET}


def test_equal_values_are_stored_differently(db, key_a):
    first, second = make_provider(), make_provider(name="web-2")

    assert raw_columns(first)[0] != raw_columns(second)[0]


def test_without_a_configured_key_a_key_derived_from_secret_key_is_used(db, settings):
    settings.SWITCHYARD_SECRETS_KEYS = []
    provider = make_provider()

    assert ENV_SECRET not in raw_columns(provider)[0]
    assert Provider.objects.get(pk=provider.pk).env == {"API_TOKEN": ENV_SECRET}
    settings.SECRET_KEY = "another-secret-key-entirely-0123456789"
    assert not isinstance(Provider.objects.get(pk=provider.pk).env, dict)


def test_the_admin_pages_never_show_the_secrets_or_their_ciphertext(db, key_a, admin_client):
    provider = make_provider()
    env, headers = raw_columns(provider)

    for url in (
        reverse("admin:nodespecs_provider_change", args=[provider.pk]),
        reverse("admin:nodespecs_provider_changelist"),
    ):
        text = html.unescape(admin_client.get(url).content.decode())
        for secret in (ENV_SECRET, "header-secret", env, headers):
            assert secret not in text


@pytest.mark.slow
@pytest.mark.usefixtures("servers")
def test_a_failing_refresh_logs_and_records_no_secret(db, key_a, caplog):
    caplog.set_level(logging.DEBUG)
    stdio = make_provider(
        name="broken",
        transport="stdio",
        url="",
        command=sys.executable,
        args=["-c", "import sys; sys.exit(3)"],
    )
    http = make_provider(name="unreachable", url="http://127.0.0.1:9/mcp")

    for provider in (stdio, http):
        with pytest.raises(ProviderRefreshError):
            provider_refresh(provider=provider)

    records = [record.getMessage() for record in caplog.records]
    assert records, "the refreshes logged nothing, so nothing was checked"
    errors = list(Provider.objects.values_list("last_error", flat=True))
    assert all(errors)
    for text in (*records, *errors):
        assert ENV_SECRET not in text
        assert "header-secret" not in text


def test_rotation_re_encrypts_every_provider_with_the_first_key(db, settings):
    settings.SWITCHYARD_SECRETS_KEYS = [KEY_A]
    provider = make_provider()
    settings.SWITCHYARD_SECRETS_KEYS = [KEY_B, KEY_A]

    call_command("rotate_secrets", stdout=io.StringIO())

    settings.SWITCHYARD_SECRETS_KEYS = [KEY_B]
    env, _ = raw_columns(provider)
    assert Fernet(KEY_B.encode()).decrypt(env.encode())
    reloaded = Provider.objects.get(pk=provider.pk)
    assert reloaded.env == {"API_TOKEN": ENV_SECRET}
    assert reloaded.updated_at == provider.updated_at
    event = AuditEvent.objects.get(object_id=str(provider.pk))
    assert (event.actor, event.action) == ("command:rotate_secrets", "re-encrypted")


@pytest.fixture
def wrong_key(db, settings):
    """A provider stored under key A, read with key C only."""
    settings.SWITCHYARD_SECRETS_KEYS = [KEY_A]
    provider = make_provider()
    settings.SWITCHYARD_SECRETS_KEYS = [KEY_C]
    return Provider.objects.get(pk=provider.pk)


def test_with_a_wrong_key_any_use_of_the_secrets_names_the_provider_and_the_fix(wrong_key):
    with pytest.raises(SecretsUnreadable) as caught:
        dict(wrong_key.env)

    message = str(caught.value)
    assert "The stored env of provider 'web' cannot be decrypted" in message
    assert "SWITCHYARD_SECRETS_KEY" in message
    assert "rotate_secrets" in message


def test_with_a_wrong_key_a_refresh_fails_with_the_reason(wrong_key):
    with pytest.raises(ProviderRefreshError, match="provider 'web' cannot be decrypted"):
        provider_refresh(provider=wrong_key)
    wrong_key.refresh_from_db()
    assert "cannot be decrypted" in wrong_key.last_error


def test_with_a_wrong_key_the_admin_explains_and_takes_new_values(wrong_key, admin_client):
    url = reverse("admin:nodespecs_provider_change", args=[wrong_key.pk])

    page = admin_client.get(url)
    assert page.status_code == 200
    assert "provider &#x27;web&#x27; cannot be decrypted" in page.content.decode()
    list_page = admin_client.get(reverse("admin:nodespecs_provider_changelist"))
    assert list_page.status_code == 200

    data = {
        "name": "web",
        "transport": "streamable_http",
        "url": "https://mcp.example.com/mcp",
        "env": "API_TOKEN=re-entered",
        "headers": "",
        "timeout_seconds": "30",
        "enabled": "on",
    }
    assert admin_client.post(url, data).status_code == 302
    assert Provider.objects.get(pk=wrong_key.pk).env == {"API_TOKEN": "re-entered"}


def test_with_a_wrong_key_rotation_names_the_provider_and_fails(wrong_key):
    with pytest.raises(CommandError, match="1 of 1 providers could not be decrypted"):
        call_command("rotate_secrets", stdout=io.StringIO())


@pytest.mark.django_db(transaction=True)
def test_the_migration_encrypts_existing_rows_and_reverses(settings):
    settings.SWITCHYARD_SECRETS_KEYS = [KEY_A]
    executor = MigrationExecutor(connection)
    executor.migrate([("nodespecs", "0002_providers")])
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO nodespecs_provider (name, title, transport, command, args, env, cwd, "
            "url, headers, timeout_seconds, enabled, last_error, created_at, updated_at) VALUES "
            "('old', '', 'stdio', 'x', '[]', %s, '', '', '{}', 30, %s, '', %s, %s)",
            [json.dumps({"API_TOKEN": ENV_SECRET}), True, "2026-01-01", "2026-01-01"],
        )
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    provider = Provider.objects.get(name="old")
    assert ENV_SECRET not in raw_columns(provider)[0]
    assert provider.env == {"API_TOKEN": ENV_SECRET}

    executor = MigrationExecutor(connection)
    executor.migrate([("nodespecs", "0002_providers")])
    with connection.cursor() as cursor:
        cursor.execute("SELECT env FROM nodespecs_provider WHERE name = 'old'")
        (env,) = cursor.fetchone()
    assert ENV_SECRET in str(env)
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def test_a_start_with_a_malformed_key_is_refused_with_how_to_make_one():
    result = start(SWITCHYARD_SECRETS_KEY=f"{KEY_A},not-a-key")

    assert result.returncode != 0
    assert "SWITCHYARD_SECRETS_KEY: key 2 is not a Fernet key" in result.stderr
    assert "Fernet.generate_key()" in result.stderr


def test_check_deploy_fails_in_production_without_a_secrets_key():
    result = start("manage.py", "check", "--deploy", **PRODUCTION | {"SWITCHYARD_SECRETS_KEY": ""})

    assert result.returncode != 0
    assert "nodespecs.E001" in result.stderr
    assert "Fernet.generate_key()" in result.stderr


def test_check_deploy_warns_about_the_derived_key_in_local_development():
    quiet = start("manage.py", "check", SWITCHYARD_SECRETS_KEY="")
    result = start("manage.py", "check", "--deploy", SWITCHYARD_SECRETS_KEY="")

    assert quiet.returncode == 0
    assert "nodespecs.W001" not in quiet.stderr  # a local start stays quiet
    assert "nodespecs.W001" in result.stderr
