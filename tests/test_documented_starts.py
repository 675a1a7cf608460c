"""Every documented start of the server (the README's first command, the Procfile,
docs/operations.md) tells uvicorn which proxies may forward client addresses, and bounds
idle and excess connections (issue 25, item 16): uvicorn's own default believes
X-Forwarded-For from 127.0.0.1."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FLAGS = ("--forwarded-allow-ips", "--timeout-keep-alive", "--limit-concurrency")


def _starts(name: str) -> list[str]:
    """The commands of a file that start uvicorn on the ASGI app, continuation lines joined."""
    text = (ROOT / name).read_text(encoding="utf-8").replace("\\\n", " ")
    return [line for line in text.splitlines() if re.search(r"uvicorn config\.asgi:app\S* -", line)]


@pytest.mark.parametrize("name", ["README.md", "Procfile", "docs/operations.md"])
def test_each_documented_start_names_the_trusted_proxies_and_bounds_connections(name):
    starts = _starts(name)

    assert starts, f"{name} starts no uvicorn"
    for line in starts:
        missing = [flag for flag in FLAGS if flag not in line]
        assert not missing, f"{name}: {line.strip()!r} lacks {missing}"
