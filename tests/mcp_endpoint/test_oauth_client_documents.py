"""Client ID Metadata Documents through this service's /authorize: a client known only by the
HTTPS URL of its metadata document signs in; a document at an address the egress rule refuses,
over plain HTTP, too large, too slow, not JSON, naming another client_id or not listing the
redirect_uri is refused with the RFC's error, a page that says why, and nothing granted.

The documents are served over real HTTPS from a thread on 127.0.0.1 (tests/oauth_documents.py),
with a certificate from a throwaway CA that the fetch trusts through SSL_CERT_FILE; loopback is
reachable only where a test opens it with EGRESS_ALLOWED_NETWORKS, as an operator would a
private network.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application, Grant

from tests.mcp_endpoint.helpers import modern
from tests.mcp_endpoint.oauth_helpers import (
    REDIRECT,
    authorization,
    consent,
    exchange,
    person,
)
from tests.oauth_documents import Answer, DocumentServer, serving_documents

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

REFUSED_PAGE = "This client cannot connect"
# What Django's own error pages say; none of them may answer on these paths.
DEBUG_PAGE_WORDS = ("Traceback", "DEBUG = True", "Django tried", "Server Error (500)")


@pytest.fixture
def documents(tmp_path, monkeypatch) -> Iterator[DocumentServer]:
    """The document server, whose CA the fetch trusts."""
    with serving_documents(tmp_path) as server:
        monkeypatch.setenv("SSL_CERT_FILE", str(server.ca))
        yield server


@pytest.fixture
def loopback_allowed(settings) -> None:
    """The operator's exemption that lets the fetch reach the document server."""
    settings.EGRESS_ALLOWED_NETWORKS = ["127.0.0.0/8"]


@pytest.fixture
def signed_in(client):
    """A person who may connect clients, signed in."""
    client.force_login(person())
    return client


def short_timeout(settings, seconds: int = 1) -> None:
    # The toolkit reloads its settings when OAUTH2_PROVIDER changes (setting_changed).
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "CIMD_FETCH_TIMEOUT_SECONDS": seconds}


def refused_page(client, url: str, **params: str) -> str:
    """GET /authorize for the client `url`: the 400 page it answers (its text), after which no
    code or token exists for anyone."""
    page = client.get("/authorize", authorization(url, **params).params)
    text = page.content.decode()
    assert page.status_code == 400, (page.status_code, page.get("Location"), text[:500])
    assert page["Content-Type"].startswith("text/html")
    assert REFUSED_PAGE in text
    assert "invalid_request" in text
    assert not any(words in text for words in DEBUG_PAGE_WORDS)
    assert not Grant.objects.exists()
    assert not AccessToken.objects.filter(user__isnull=False).exists()
    return text


def nothing_registered(url: str) -> bool:
    return not Application.objects.filter(client_id=url).exists()


# The flow.


def test_a_client_known_by_its_document_signs_in_and_calls_the_endpoint(
    signed_in, documents, loopback_allowed
):
    url = documents.document("/clients/inspector.json")
    request = authorization(url)
    page = signed_in.get("/authorize", request.params)
    assert page.status_code == 200, page.content[:500]
    assert "Document client" in page.content.decode()
    code = consent(signed_in, request)["code"][0]
    status, answer = exchange(signed_in, request, code)
    assert status == 200, answer
    signed_in.logout()
    listed = modern(signed_in, "tools/list", key=answer["access_token"])
    assert listed.status_code == 200, listed.content
    application = Application.objects.get(client_id=url)
    assert application.registration_source == Application.RegistrationSource.CIMD
    assert application.client_type == Application.CLIENT_PUBLIC
    assert AccessToken.objects.get(user__isnull=False).application == application
    assert documents.hits["/clients/inspector.json"] == 1


def test_a_document_is_fetched_again_only_after_its_max_age(signed_in, documents, loopback_allowed):
    url = documents.document("/clients/cached.json")
    for _ in range(2):
        assert signed_in.get("/authorize", authorization(url).params).status_code == 200
    assert documents.hits["/clients/cached.json"] == 1
    Application.objects.filter(client_id=url).update(
        cimd_expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert signed_in.get("/authorize", authorization(url).params).status_code == 200
    assert documents.hits["/clients/cached.json"] == 2


# Where the document is.


def test_a_document_on_loopback_is_refused_without_the_operators_exemption(signed_in, documents):
    url = documents.document("/clients/local.json")
    text = refused_page(signed_in, url)
    assert "127.0.0.1 is a loopback address" in text
    assert "EGRESS_ALLOWED_NETWORKS" in text
    assert documents.hits["/clients/local.json"] == 0  # judged before connecting
    assert nothing_registered(url)


def test_an_exemption_for_another_network_does_not_open_loopback(signed_in, documents, settings):
    settings.EGRESS_ALLOWED_NETWORKS = ["10.0.0.0/8"]
    url = documents.document("/clients/local.json")
    assert "127.0.0.1 is a loopback address" in refused_page(signed_in, url)
    assert documents.hits["/clients/local.json"] == 0


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("https://localhost/client.json", "localhost is a loopback address"),
        ("https://10.1.2.3/client.json", "10.1.2.3 is a private address"),
        ("https://[fd12::1]/client.json", "fd12::1 is a private address"),
        ("https://169.254.169.254/latest/client.json", "is a cloud metadata address"),
        # Azure's WireServer: a public address, which the toolkit's own rule lets through.
        ("https://168.63.129.16/client.json", "is a cloud metadata address"),
        ("https://[::ffff:127.0.0.1]/client.json", "is a loopback address"),
        ("https://0.0.0.0/client.json", "is an unspecified address"),
    ],
)
def test_a_document_at_an_internal_address_is_refused_before_connecting(signed_in, url, words):
    text = refused_page(signed_in, url)
    assert words in text
    assert "public addresses only" in text
    assert nothing_registered(url)


def test_a_plain_http_client_id_is_refused(signed_in, documents, loopback_allowed):
    url = documents.document("/clients/plain.json").replace("https://", "http://")
    assert "fetched over HTTPS only" in refused_page(signed_in, url)
    assert documents.hits["/clients/plain.json"] == 0
    assert nothing_registered(url)


def test_a_certificate_the_server_does_not_trust_is_refused(
    signed_in, documents, loopback_allowed, monkeypatch
):
    monkeypatch.delenv("SSL_CERT_FILE")
    url = documents.document("/clients/untrusted.json")
    assert "its TLS certificate for 127.0.0.1 was not accepted" in refused_page(signed_in, url)
    assert nothing_registered(url)


def test_a_redirect_is_not_followed(signed_in, documents, loopback_allowed):
    documents.document("/clients/moved.json")
    url = documents.serve(
        "/clients/old.json",
        Answer(b"", status=302, headers=(("Location", "/clients/moved.json"),)),
    )
    assert "returned HTTP 302" in refused_page(signed_in, url)
    assert documents.hits["/clients/moved.json"] == 0
    assert nothing_registered(url)


# What the document is.


def test_a_document_over_the_size_limit_is_refused(signed_in, documents, loopback_allowed):
    url = documents.origin + "/clients/large.json"
    body = json.dumps({"client_id": url, "redirect_uris": [REDIRECT], "padding": "x" * 16384})
    documents.serve("/clients/large.json", Answer(body.encode()))
    text = refused_page(signed_in, url)
    assert "exceeds the maximum allowed size" in text
    assert "at most 16384 bytes (CIMD_MAX_DOCUMENT_SIZE)" in text
    assert nothing_registered(url)


@pytest.mark.parametrize(
    "answer",
    [
        Answer(b"{}", wait=5),
        Answer(b"{" + b" " * 60 + b"}", drip=0.1),
        Answer(b"{}", drip=0.05, drip_headers=True),
    ],
    ids=["waits", "drips-its-body", "drips-its-headers"],
)
def test_a_document_not_fetched_within_the_time_limit_is_refused(
    signed_in, documents, loopback_allowed, settings, answer
):
    short_timeout(settings, 1)
    url = documents.serve("/clients/slow.json", answer)
    started = time.monotonic()
    text = refused_page(signed_in, url)
    # Each byte comes well within the limit; the whole answer does not.
    assert time.monotonic() - started < 2.5
    assert "it was not fetched within 1 s (CIMD_FETCH_TIMEOUT_SECONDS)" in text
    assert nothing_registered(url)


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (Answer(b"{}", content_type="text/html"), "is not JSON (Content-Type: &#x27;text/html"),
        (Answer(b"<html>client</html>"), "is not valid JSON"),
        (Answer(b"[]"), "must be a JSON object"),
        (Answer(b"{}", status=404), "returned HTTP 404"),
    ],
    ids=["html", "invalid", "array", "missing"],
)
def test_a_document_that_is_no_json_object_is_refused(
    signed_in, documents, loopback_allowed, answer, words
):
    url = documents.serve("/clients/odd.json", answer)
    assert words in refused_page(signed_in, url)
    assert nothing_registered(url)


def test_a_document_naming_another_client_id_is_refused(signed_in, documents, loopback_allowed):
    url = documents.document("/clients/mine.json", client_id="https://elsewhere.example/c.json")
    text = refused_page(signed_in, url)
    assert "names &#x27;https://elsewhere.example/c.json&#x27; as its client_id" in text
    assert nothing_registered(url)
    assert nothing_registered("https://elsewhere.example/c.json")


def test_a_document_for_a_confidential_client_is_refused(signed_in, documents, loopback_allowed):
    url = documents.document(
        "/clients/secret.json", token_endpoint_auth_method="client_secret_post"
    )
    assert "CIMD clients must be public" in refused_page(signed_in, url)
    assert nothing_registered(url)


def test_a_redirect_uri_the_document_does_not_list_is_refused(
    signed_in, documents, loopback_allowed
):
    url = documents.document("/clients/narrow.json", redirect_uris=[REDIRECT + "/elsewhere"])
    text = refused_page(signed_in, url)
    assert "is not one of the redirect_uris of the client&#x27;s metadata document" in text
    assert "http://127.0.0.1:33418/callback" in text


def test_a_listed_redirect_uri_this_service_refuses_is_refused_with_its_reason(
    signed_in, documents, loopback_allowed
):
    elsewhere = "http://client.example/callback"
    url = documents.document("/clients/plain-redirect.json", redirect_uris=[elsewhere])
    text = refused_page(signed_in, url, redirect_uri=elsewhere)
    assert "is neither HTTPS nor plain HTTP to a loopback address" in text


def test_a_refused_document_is_not_fetched_again_for_a_while_and_the_page_still_says_why(
    signed_in, documents, loopback_allowed
):
    url = documents.serve("/clients/broken.json", Answer(b"not json"))
    for _ in range(2):
        assert "is not valid JSON" in refused_page(signed_in, url)
    assert documents.hits["/clients/broken.json"] == 1


# What answers, with DEBUG on or off.


@pytest.mark.parametrize("debug", [False, True])
def test_no_refusal_answers_a_debug_page(client, documents, loopback_allowed, settings, debug):
    settings.DEBUG = debug
    client.raise_request_exception = False
    user = person()
    urls = [
        "https://10.1.2.3/client.json",
        documents.serve("/clients/html.json", Answer(b"<html>", content_type="text/html")),
        documents.serve("/clients/missing.json", Answer(b"", status=500)),
        "http://127.0.0.1:1/clients/plain.json",
        "https://client.invalid/client.json",
        "https://127.0.0.1:1/clients/closed.json",
    ]
    for url in urls:
        client.logout()
        sign_in = client.get("/authorize", authorization(url).params)
        assert sign_in.status_code == 302  # nothing fetched before signing in...
        assert sign_in["Location"].startswith("/oauth/sign-in?")
        refused_page(client, url, prompt="none")  # ...unless the client asks for no sign-in
        client.force_login(user)
        refused_page(client, url)
        answer = client.post(
            "/token",
            {
                "grant_type": "authorization_code",
                "code": "nothing",
                "redirect_uri": REDIRECT,
                "client_id": url,
                "code_verifier": "v" * 43,
            },
        )
        assert answer.status_code == 401, answer.content[:300]
        assert answer["Content-Type"].startswith("application/json")
        assert answer.json()["error"] == "invalid_client"
