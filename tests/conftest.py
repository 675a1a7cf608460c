"""Shared fixtures: a fixed cast of users and the built-in catalog."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from nodespecs.catalog import read_builtin_catalog
from nodespecs.registry import Registry
from nodespecs.specformat import dump_spec_document


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """The user fixtures set passwords; the production hasher would cost ~0.5 s per user."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Each test starts with an empty cache, so no registry built by another test is reused."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture(scope="session")
def builtin_documents() -> list[dict]:
    return [dump_spec_document(document) for document in read_builtin_catalog()]


@pytest.fixture(scope="session")
def registry(builtin_documents) -> Registry:
    """The built-in catalog as an in-memory registry (no database needed)."""
    return Registry(builtin_documents)


@pytest.fixture
def loaded_catalog(db):
    """The built-in catalog loaded into the test database."""
    from nodespecs.catalog import load_builtin_catalog

    return load_builtin_catalog()


@pytest.fixture
def author(django_user_model):
    """A staff user who may edit specs."""
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user(
        "alice", password="correct-horse-battery", is_staff=True
    )
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="nodespecs"))
    return user


@pytest.fixture
def outsider(django_user_model):
    """A logged-in user who is not staff."""
    return django_user_model.objects.create_user("mallory", password="correct-horse-battery")
