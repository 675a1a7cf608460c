"""Extension modules (MCP_EXTENSION_MODULES) declare tools, resources and prompts that the
endpoint serves beside its own; the conformance fixtures are one, and live in tests/, where the
product never reaches."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import types as pytypes
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from mcp_endpoint.features.extensions import Extension, declared_extension

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("config", "nodespecs", "graphs", "mcp_endpoint")

START = """
import json, django
django.setup()
from graphs.authoring.services import reserved_tool_names
from mcp_endpoint.features import extensions, prompts
print(json.dumps({
    "tools": sorted(extensions.installed().tools),
    "reserved": "test_simple_text" in reserved_tool_names(),
    "prompts": "test_simple_prompt" in prompts.all_prompts(),
    "resources": sorted(extensions.installed().resources),
}))
"""


def start(**env: str) -> subprocess.CompletedProcess:
    """A fresh Python that sets Django up as a server would, with `env` added."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MCP_")}
    return subprocess.run(
        [sys.executable, "-c", START],
        cwd=ROOT,
        env={**clean, "DJANGO_SETTINGS_MODULE": "config.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_an_extension_module_is_imported_and_its_declaration_read(monkeypatch):
    module = pytypes.ModuleType("switchyard_test_extension")
    module.EXTENSION = Extension(subscribable={"test://x"})
    monkeypatch.setitem(sys.modules, "switchyard_test_extension", module)
    assert declared_extension("switchyard_test_extension") is module.EXTENSION


def test_a_module_that_cannot_be_imported_stops_the_start_saying_which():
    with pytest.raises(ImproperlyConfigured, match=r"MCP_EXTENSION_MODULES names 'no\.such'"):
        declared_extension("no.such")


def test_a_module_without_a_declaration_stops_the_start_saying_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "switchyard_bare", pytypes.ModuleType("switchyard_bare"))
    with pytest.raises(ImproperlyConfigured, match=r"declares no EXTENSION"):
        declared_extension("switchyard_bare")


@pytest.mark.slow
def test_by_default_no_fixture_is_served():
    started = start()
    assert started.returncode == 0, started.stderr
    state = json.loads(started.stdout)
    assert state == {"tools": [], "reserved": False, "prompts": False, "resources": []}


@pytest.mark.slow
def test_the_conformance_fixtures_are_served_as_an_extension():
    started = start(MCP_EXTENSION_MODULES="tests.conformance_fixtures")
    assert started.returncode == 0, started.stderr
    state = json.loads(started.stdout)
    assert "test_simple_text" in state["tools"]
    assert "test_input_required_result_tampered_state" in state["tools"]
    # A workflow may not take a fixture's name: it would be hidden behind it.
    assert state["reserved"] is True
    assert state["prompts"] is True
    assert "test://static-text" in state["resources"]


@pytest.mark.slow
def test_the_former_boolean_setting_names_its_replacement():
    started = start(MCP_CONFORMANCE_FIXTURES="true")
    assert started.returncode != 0
    assert "MCP_EXTENSION_MODULES=tests.conformance_fixtures" in started.stderr


def test_the_product_never_imports_the_tests():
    importing = re.compile(r"^\s*(from|import)\s+tests(\.|\s)", re.MULTILINE)
    offenders = [
        str(path.relative_to(ROOT))
        for package in PRODUCT
        for path in (ROOT / package).rglob("*.py")
        if importing.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
