"""Settings come from environment variables; each case starts a fresh Python with its own env."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Everything config/settings.py reads, so the developer's or CI's own values cannot leak in.
SETTINGS_VARIABLES = (
    "DEBUG",
    "SECRET_KEY",
    "ALLOWED_HOSTS",
    "CSRF_TRUSTED_ORIGINS",
    "DATABASE_URL",
    "REDIS_URL",
    "SECURE_COOKIES",
    "SECURE_SSL_REDIRECT",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
    "LOG_LEVEL",
    "SWITCHYARD_SECRETS_KEY",
)
PRODUCTION = {
    "DEBUG": "false",
    # `check --deploy` wants 50 characters or more, of many different ones.
    "SECRET_KEY": "a-long-random-production-key-0123456789-abcdefghijklmnopqrstuvwxyz",
    "ALLOWED_HOSTS": "switchyard.example.com",
    # Provider secrets need their own key in production (`check --deploy` fails without).
    "SWITCHYARD_SECRETS_KEY": "65-2cWKlYx0otmj40bPVHM-mOw8DZJmyM6NT6oKA1X0=",
}

PRINT_SETTINGS = """
import json
from django.conf import settings
database = settings.DATABASES["default"]
print(json.dumps({
    "DEBUG": settings.DEBUG,
    "SECRET_KEY": settings.SECRET_KEY,
    "ALLOWED_HOSTS": settings.ALLOWED_HOSTS,
    "ENGINE": database["ENGINE"],
    "NAME": str(database["NAME"]),
    "HOST": database.get("HOST", ""),
    "PORT": database.get("PORT", ""),
    "USER": database.get("USER", ""),
    "CACHE_BACKEND": settings.CACHES["default"]["BACKEND"],
    "CACHE_LOCATION": settings.CACHES["default"].get("LOCATION", ""),
    "SESSION_COOKIE_SECURE": settings.SESSION_COOKIE_SECURE,
    "SECURE_SSL_REDIRECT": settings.SECURE_SSL_REDIRECT,
    "SECURE_HSTS_SECONDS": settings.SECURE_HSTS_SECONDS,
}))
"""


def start(*command: str, **variables: str) -> subprocess.CompletedProcess:
    """Run `command` (by default: load the settings and print them) in a new interpreter with
    only `variables` set on top of a clean env."""
    env = {name: value for name, value in os.environ.items() if name not in SETTINGS_VARIABLES}
    env["DJANGO_SETTINGS_MODULE"] = "config.settings"
    env.update(variables)
    return subprocess.run(
        [sys.executable, *(command or ("-c", PRINT_SETTINGS))],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def loaded(**variables: str) -> dict:
    result = start(**variables)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_with_no_environment_it_starts_for_local_development():
    settings = loaded()

    assert settings["DEBUG"] is True
    assert settings["ALLOWED_HOSTS"] == ["localhost", "127.0.0.1", "[::1]"]
    assert settings["SESSION_COOKIE_SECURE"] is False


def test_it_refuses_to_run_without_debug_and_without_a_secret_key():
    result = start(DEBUG="false")

    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "SECRET_KEY is not set" in result.stderr
    assert result.stdout == ""


def test_it_runs_without_debug_when_a_secret_key_is_given():
    settings = loaded(DEBUG="false", SECRET_KEY="a-long-random-production-key-0123456789")

    assert settings["DEBUG"] is False
    assert settings["SECRET_KEY"] == "a-long-random-production-key-0123456789"
    assert settings["SESSION_COOKIE_SECURE"] is True


@pytest.mark.parametrize(("raw", "expected"), [("0", False), ("No", False), (" TRUE ", True)])
def test_it_reads_the_usual_spellings_of_a_boolean(raw, expected):
    assert loaded(DEBUG=raw, SECRET_KEY="k" * 40)["DEBUG"] is expected


def test_it_refuses_a_debug_value_that_is_not_a_clear_yes_or_no():
    result = start(DEBUG="maybe")

    assert result.returncode != 0
    assert "DEBUG='maybe' is not a boolean" in result.stderr


def test_it_reads_allowed_hosts_as_a_comma_separated_list():
    settings = loaded(ALLOWED_HOSTS="switchyard.example.com, api.example.com,,")

    assert settings["ALLOWED_HOSTS"] == ["switchyard.example.com", "api.example.com"]


def test_a_postgresql_database_url_selects_postgresql():
    settings = loaded(DATABASE_URL="postgresql://u@h:5432/n")

    assert settings["ENGINE"] == "django.db.backends.postgresql"
    assert settings["NAME"] == "n"
    assert settings["HOST"] == "h"
    assert settings["PORT"] == 5432
    assert settings["USER"] == "u"


def test_without_a_database_url_it_uses_a_sqlite_file_in_the_project():
    settings = loaded()

    assert settings["ENGINE"] == "config.sqlite"
    assert Path(settings["NAME"]) == ROOT / "db.sqlite3"


def test_an_empty_database_url_falls_back_to_sqlite():
    assert loaded(DATABASE_URL="")["ENGINE"] == "config.sqlite"


def test_a_redis_url_selects_the_redis_cache():
    settings = loaded(REDIS_URL="redis://cache.internal:6379/1")

    assert settings["CACHE_BACKEND"] == "django.core.cache.backends.redis.RedisCache"
    assert settings["CACHE_LOCATION"] == "redis://cache.internal:6379/1"


def test_without_a_redis_url_the_cache_is_in_process():
    settings = loaded()

    assert settings["CACHE_BACKEND"] == "django.core.cache.backends.locmem.LocMemCache"


def test_a_production_start_passes_djangos_deploy_checks():
    result = start("manage.py", "check", "--deploy", "--fail-level", "WARNING", **PRODUCTION)

    assert result.returncode == 0, result.stderr
    assert "System check identified no issues" in result.stdout


def test_a_production_start_redirects_to_https_and_sends_hsts_for_a_year():
    settings = loaded(**PRODUCTION)

    assert settings["SECURE_SSL_REDIRECT"] is True
    assert settings["SECURE_HSTS_SECONDS"] == 31536000


def test_a_plain_http_test_start_can_turn_the_https_controls_off():
    settings = loaded(
        **PRODUCTION, SECURE_COOKIES="false", SECURE_SSL_REDIRECT="false", SECURE_HSTS_SECONDS="0"
    )

    assert settings["SESSION_COOKIE_SECURE"] is False
    assert settings["SECURE_SSL_REDIRECT"] is False
    assert settings["SECURE_HSTS_SECONDS"] == 0


def test_a_local_start_does_not_redirect_to_https():
    assert loaded()["SECURE_SSL_REDIRECT"] is False


def test_it_refuses_an_hsts_age_that_is_not_a_whole_number():
    result = start(**PRODUCTION, SECURE_HSTS_SECONDS="1y")

    assert result.returncode != 0
    assert "SECURE_HSTS_SECONDS='1y' is not a whole number" in result.stderr
