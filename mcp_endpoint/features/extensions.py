"""Extensions: tools, prompts and resources beyond this server's own, declared by the modules
that `MCP_EXTENSION_MODULES` names (the conformance fixtures, in tests/, are one).

The endpoint asks for them (`installed()`): each module named declares one `EXTENSION`, and
nothing is registered into the endpoint from outside. An empty setting serves none.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from mcp import types

from mcp_endpoint.jsonrpc.context import CallContext
from nodespecs.settings_reads import read_once

ResourceReader = Callable[[], list[Any]]
# Reads a URI of its template; None for a URI it does not serve.
TemplateReader = Callable[[str], list[Any] | None]


@dataclass(frozen=True)
class ExtraTool:
    """A tool beyond this server's own. Its handler returns a result, or a generator that asks
    the client for input (mcp_endpoint/jsonrpc/interaction.py)."""

    tool: types.Tool
    handler: Callable[[dict[str, Any], CallContext], Any]


@dataclass(frozen=True)
class Extension:
    """What an extension module declares, as its module-level `EXTENSION`: tools by name,
    prompts by name with their handlers, fixed resources by URI with a reader, templates with
    a reader, and the URIs a client may subscribe to."""

    tools: dict[str, ExtraTool] = field(default_factory=dict)
    prompts: dict[str, tuple[types.Prompt, Callable[..., Any]]] = field(default_factory=dict)
    resources: dict[str, tuple[types.Resource, ResourceReader]] = field(default_factory=dict)
    templates: list[tuple[types.ResourceTemplate, TemplateReader]] = field(default_factory=list)
    subscribable: set[str] = field(default_factory=set)


@read_once
def installed() -> Extension:
    """Every extension the settings name, merged (checked when the app starts)."""
    return _merged(tuple(settings.MCP_EXTENSION_MODULES))


@cache
def _merged(paths: tuple[str, ...]) -> Extension:
    merged = Extension()
    for path in paths:
        declared = declared_extension(path)
        merged.tools.update(declared.tools)
        merged.prompts.update(declared.prompts)
        merged.resources.update(declared.resources)
        merged.templates.extend(declared.templates)
        merged.subscribable.update(declared.subscribable)
    return merged


def declared_extension(path: str) -> Extension:
    """The `EXTENSION` of the module at dotted `path`; `ImproperlyConfigured` saying what to
    fix when there is none."""
    try:
        module = importlib.import_module(path)
    except ImportError as exc:
        raise ImproperlyConfigured(
            f"MCP_EXTENSION_MODULES names {path!r}, which cannot be imported ({exc}): give "
            "dotted module paths importable from the server's working directory."
        ) from exc
    extension = getattr(module, "EXTENSION", None)
    if not isinstance(extension, Extension):
        raise ImproperlyConfigured(
            f"MCP_EXTENSION_MODULES names {path!r}, which declares no EXTENSION: an extension "
            "module declares its tools, prompts and resources as "
            "EXTENSION = mcp_endpoint.features.extensions.Extension(...)."
        )
    return extension
