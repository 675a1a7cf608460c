"""API keys in the admin: created with the key shown once, revoked with an action."""

import pytest

from mcp_endpoint.access.keys import api_key_authenticate, api_key_create
from mcp_endpoint.models import ApiKey

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", password="x" * 20))
    return client


def test_a_key_created_in_the_admin_is_shown_once_and_works(admin_client):
    response = admin_client.post(
        "/admin/mcp_endpoint/apikey/add/",
        {"name": "ci robot", "scopes": ["tools:read", "tools:execute"]},
        follow=True,
    )
    assert response.status_code == 200
    words = " ".join(m.message for m in response.context["messages"]).split()
    [secret] = [word for word in words if word.startswith("sy_")]
    key = ApiKey.objects.get(name="ci robot")
    assert key.scopes == ["tools:read", "tools:execute"]
    assert secret not in key.secret_hash
    assert api_key_authenticate(secret).key == key
    # The change page never shows it again.
    page = admin_client.get(f"/admin/mcp_endpoint/apikey/{key.pk}/change/").content.decode()
    assert secret not in page
    assert key.prefix in page


def test_a_key_needs_at_least_one_scope(admin_client):
    response = admin_client.post("/admin/mcp_endpoint/apikey/add/", {"name": "nothing"})
    assert response.status_code == 200
    assert "This field is required" in response.content.decode()
    assert not ApiKey.objects.exists()


def test_the_revoke_action_stops_a_key_at_once(admin_client):
    key, secret = api_key_create(name="old", scopes=["tools:read"])
    response = admin_client.post(
        "/admin/mcp_endpoint/apikey/",
        {"action": "revoke", "_selected_action": [key.pk]},
        follow=True,
    )
    assert "Revoked 1 key" in response.content.decode()
    assert "was revoked" in api_key_authenticate(secret).problem
