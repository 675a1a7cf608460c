"""Credentials in URLs and command lines are masked where a graph document or an error shows
them (nodespecs/secrets.py `mask_credentials`, `mask_command_args`), and what they do not
hold is left as it was."""

from __future__ import annotations

import time

import pytest

from nodespecs.secrets import (
    CREDENTIAL_MASK,
    is_secret_like,
    mask_command_args,
    mask_credentials,
    mask_url,
)

pytestmark = pytest.mark.timeout(30)
M = CREDENTIAL_MASK


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        (
            "postgresql://app:PASSWORD@db.internal:5432/app",
            f"postgresql://app:{M}@db.internal:5432/app",
        ),
        ("https://user:pass@h.example/mcp", f"https://user:{M}@h.example/mcp"),
        ("https://ghp_token123@github.com/org/repo", f"https://{M}@github.com/org/repo"),
        (
            "https://h.example/mcp?api_key=K1&page=2&X-Amz-Signature=abc&accessToken=t",
            f"https://h.example/mcp?api_key={M}&page=2&X-Amz-Signature={M}&accessToken={M}",
        ),
        (
            "https://h.example/cb#access_token=abc&state=s",
            f"https://h.example/cb#access_token={M}&state=s",
        ),
        # A password with "/" or "#" unescaped, as people write them, is masked whole.
        (
            "postgresql://app:pa/ss#w@db/x?sslmode=require",
            f"postgresql://app:{M}@db/x?sslmode=require",
        ),
        ("https://h/?next=https://u:p@other/x&a=1", f"https://h/?next=https://{M}@other/x&a=1"),
        ("redis://:hunter22@cache:6379/0", f"redis://:{M}@cache:6379/0"),
        # Cut short before its "@" (a long command line in an error message).
        ("postgresql://app:verylongpasswo...", f"postgresql://app:{M}"),
    ],
)
def test_a_url_shows_where_it_goes_but_not_its_credentials(url, masked):
    assert mask_url(url) == masked
    assert mask_credentials(url) == masked


# What holds no credential, among URLs that look close to ones that do.
PLAIN_URLS = [
    "http://127.0.0.1:9/mcp",
    "http://[::1]:8080/mcp",
    "http://host:/mcp",
    "https://registry.npmjs.org/@scope/pkg",
    "https://h:8080/@user/profile",
    "https://h.example/search?q=monkey&keyword=x&page=2",
]


def test_only_credentials_are_masked_in_urls():
    with_credentials = "https://user:pass@h.example/mcp?api_key=K1"

    assert [mask_credentials(url) for url in PLAIN_URLS] == PLAIN_URLS
    assert mask_credentials(with_credentials) == f"https://user:{M}@h.example/mcp?api_key={M}"


def test_an_error_message_keeps_its_words_and_loses_the_credentials_of_its_urls():
    message = (
        "MCP server 'db' (streamable_http https://svc:s3cr3t-pw@10.0.0.5/mcp?api_key=KEY-42&v=1) "
        "cannot be reached: Connection refused. Client error for url 'https://tok@h/x'."
    )

    masked = mask_credentials(message)

    for secret in ("s3cr3t-pw", "KEY-42", "tok@"):
        assert secret not in masked
    assert "MCP server 'db' (streamable_http https://svc:" in masked
    assert "10.0.0.5/mcp?api_key=<secret>&v=1)" in masked
    assert "cannot be reached: Connection refused." in masked
    assert mask_credentials(masked) == masked  # masking twice changes nothing more


def test_a_command_line_in_a_message_loses_its_flag_values_and_secret_assignments():
    line = (
        "stdio: npx -y srv --token abc123 --port 5432 --api-key=zzz9 DB_PASSWORD=hunter22 "
        "host=db password=pw-1234 user=app"
    )

    masked = mask_credentials(line)

    for secret in ("abc123", "zzz9", "hunter22", "pw-1234"):
        assert secret not in masked
    assert "--port 5432" in masked
    assert f"host=db password={M} user=app" in masked
    assert f"--token {M}" in masked
    assert f"--api-key={M}" in masked


def test_stdio_args_lose_the_value_after_a_secret_flag_and_the_user_info_of_dsns():
    args = [
        "-y",
        "@modelcontextprotocol/server-postgres",
        "postgresql://app:PASSWORD@db.internal/app",
        "--token",
        "abc123",
        "--password=pw1234",
        "--secret",
        "--verbose",
        "--port",
        "5432",
        "libpq: host=db password=pw-5678",
    ]

    masked = mask_command_args(args)

    assert masked == (
        "-y",
        "@modelcontextprotocol/server-postgres",
        f"postgresql://app:{M}@db.internal/app",
        "--token",
        M,
        f"--password={M}",
        "--secret",
        "--verbose",  # a flag after a secret flag is not its value
        "--port",
        "5432",
        f"libpq: host=db password={M}",
    )


def test_secret_like_names_are_told_by_their_words():
    secret = ["api_key", "apiKey", "X-Api-Key", "access_token", "clientsecret", "PASSWORD"]
    secret += ["pwd", "sig", "X-Amz-Signature", "--auth", "credentials", "db-pass"]
    plain = ["keyword", "monkey", "author", "page", "port", "passage", "signal"]

    assert [name for name in secret + plain if is_secret_like(name)] == secret


@pytest.mark.parametrize(
    "text",
    [
        "a" * 200_000,
        "a://" * 50_000,
        "--token " * 30_000,
        "a=" * 100_000,
        "http://h/?a=" * 10_000,
        "http://" + "a:" * 100_000,
        "http://a:b/" + "@" * 100_000,
    ],
)
def test_masking_a_long_hostile_text_takes_linear_time(text):
    started = time.perf_counter()
    masked = mask_credentials(f"{text} https://user:pw-1234@h/")
    # About 20 ms each on a laptop; a quadratic search would take minutes.
    assert time.perf_counter() - started < 2
    assert "pw-1234" not in masked
