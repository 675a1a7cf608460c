"""The API docs page and the favicon work offline: every asset is served by this server.

Swagger UI from a CDN left /api/v1/docs blank without a network (`SwaggerUIBundle is not
defined`); django-ninja ships the files, and these tests hold the page to them.
"""

from __future__ import annotations

from html.parser import HTMLParser

import pytest


class AssetLinks(HTMLParser):
    """The URLs a page loads: every <script src> and <link href>."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        wanted = {"script": "src", "link": "href"}.get(tag)
        for name, value in attrs:
            if name == wanted and value:
                self.urls.append(value)


def asset_urls(html: str) -> list[str]:
    parser = AssetLinks()
    parser.feed(html)
    return parser.urls


def body_bytes(response) -> bytes:
    # WhiteNoise answers with a streaming file response.
    if response.streaming:
        return b"".join(response.streaming_content)
    return response.content


def assert_served_locally(client, urls: list[str]) -> None:
    for url in urls:
        # "//cdn…" is as external as "https://cdn…"; only paths on this server are local.
        assert url.startswith("/"), f"external asset: {url}"
        assert not url.startswith("//"), f"external asset: {url}"
        response = client.get(url)
        assert response.status_code == 200, f"{url} answered {response.status_code}"
        assert body_bytes(response), f"{url} is empty"


def test_api_docs_load_only_local_assets(client):
    response = client.get("/api/v1/docs")

    assert response.status_code == 200
    urls = asset_urls(response.content.decode())
    assert any(url.endswith("swagger-ui-bundle.js") for url in urls), urls
    assert any(url.endswith("swagger-ui.css") for url in urls), urls
    assert_served_locally(client, urls)


def test_favicon_ico_answers_with_the_icon(client):
    response = client.get("/favicon.ico", follow=True)

    assert response.status_code == 200
    assert response["Content-Type"].startswith("image/svg+xml")
    assert b"<svg" in body_bytes(response)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("page", "signed_in"),
    [
        ("/admin/login/", False),
        ("/admin/", True),
        # Change forms load the most assets: widgets' scripts and styles.
        ("/admin/nodespecs/nodespec/add/", True),
        ("/admin/graphs/workflow/add/", True),
        ("/runs/", True),
        ("/workflows/", True),
    ],
)
def test_pages_link_the_favicon_and_load_only_local_assets(client, admin_user, page, signed_in):
    if signed_in:
        client.force_login(admin_user)
    response = client.get(page)

    assert response.status_code == 200
    urls = asset_urls(response.content.decode())
    assert any(url.endswith("favicon.svg") for url in urls), urls
    assert_served_locally(client, urls)
