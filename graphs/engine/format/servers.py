"""The ``mcpServers`` section: downstream MCP servers, read from and written back to YAML.

Accepted forms, as in the reference implementation of the format and in common MCP client
configuration files:

- stdio: ``command`` (required), ``args``, ``env``, ``cwd``; ``type: stdio`` is optional.
- Streamable HTTP: ``url`` with ``type`` one of ``streamableHttp``, ``streamable-http``,
  ``streamable_http``, ``http``, or no type at all.
- SSE: ``url`` with ``type: sse``, or no type and a URL path ending in ``/sse``.

``headers`` (HTTP only), ``timeout`` (seconds, any transport) and ``sse_read_timeout`` (HTTP
only: seconds to wait for the server's next event, as Dify names it) are optional. ``transport``
is accepted as a synonym of ``type``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from graphs.engine.definition import ServerConfig

_TRANSPORT_NAMES = {
    "stdio": "stdio",
    "sse": "sse",
    "http": "streamable_http",
    "streamablehttp": "streamable_http",
    "streamable-http": "streamable_http",
    "streamable_http": "streamable_http",
}
_KEYS = {
    "stdio": {"type", "transport", "command", "args", "env", "cwd", "timeout"},
    "streamable_http": {"type", "transport", "url", "headers", "timeout", "sse_read_timeout"},
    "sse": {"type", "transport", "url", "headers", "timeout", "sse_read_timeout"},
}


#: The most servers one definition may declare: each becomes a registered provider (or is
#: looked up as one), so a definition of thousands would register thousands.
MAX_SERVERS = 64


def too_many_servers(raw: Mapping[str, Any]) -> str | None:
    """Why an ``mcpServers`` mapping is refused for its size, or None."""
    if len(raw) <= MAX_SERVERS:
        return None
    return (
        f"field 'mcpServers': {len(raw)} servers, over the limit of {MAX_SERVERS} in one "
        "definition; declare only the servers its nodes call, or split the tools into "
        "several definitions"
    )


def parse_servers(raw: Any, problems: list[str]) -> dict[str, ServerConfig]:
    """The servers of an ``mcpServers`` mapping; each problem found is appended to problems."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.append(
            "field 'mcpServers': must be a mapping of server name to its settings, "
            f"got {type(raw).__name__}"
        )
        return {}
    refusal = too_many_servers(raw)
    if refusal is not None:
        problems.append(refusal)
        return {}
    servers = {}
    for name, settings in raw.items():
        server = parse_server(str(name), settings, problems)
        if server is not None:
            servers[server.name] = server
    return servers


def parse_server(name: str, raw: Any, problems: list[str]) -> ServerConfig | None:
    """One server's settings; None (with problems appended) when they cannot be used."""
    where = f"server {name!r}"
    if not isinstance(raw, Mapping):
        problems.append(f"{where}: must be a mapping with `command` or `url`")
        return None
    start = len(problems)
    transport = _transport(raw, where, problems)
    if transport is None:
        return None
    unknown = sorted(set(map(str, raw)) - _KEYS[transport])
    if unknown:
        problems.append(
            f"{where}: unknown key(s) {', '.join(unknown)}; a {transport} server allows "
            f"{', '.join(sorted(_KEYS[transport]))}"
        )
    timeout = raw.get("timeout")
    if timeout is not None and not _positive_number(timeout):
        problems.append(f"{where}, field 'timeout': must be a positive number of seconds")
    if transport == "stdio":
        args = raw.get("args", [])
        if not _is_string_list(args):
            problems.append(f"{where}, field 'args': must be a list of strings")
        env = _string_map(raw.get("env"), f"{where}, field 'env'", problems)
        cwd = raw.get("cwd", "")
        if not isinstance(cwd, str):
            problems.append(f"{where}, field 'cwd': must be a folder path")
        config = ServerConfig(
            name,
            transport,
            command=raw["command"],
            args=tuple(args) if _is_string_list(args) else (),
            env=env,
            cwd=str(cwd),
            timeout_seconds=timeout,
        )
    else:
        url = raw["url"]
        if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https"):
            problems.append(f"{where}, field 'url': must be an http:// or https:// URL")
        headers = _string_map(raw.get("headers"), f"{where}, field 'headers'", problems)
        read_timeout = raw.get("sse_read_timeout")
        if read_timeout is not None and not _positive_number(read_timeout):
            problems.append(
                f"{where}, field 'sse_read_timeout': must be a positive number of seconds"
            )
        config = ServerConfig(
            name,
            transport,
            url=str(url),
            headers=headers,
            timeout_seconds=timeout,
            sse_read_timeout=read_timeout,
        )
    return None if len(problems) > start else config


def server_to_dict(server: ServerConfig) -> dict[str, Any]:
    """The YAML form of a server, which ``parse_server`` reads back to an equal config."""
    if server.transport == "stdio":
        result: dict[str, Any] = {"command": server.command, "args": list(server.args)}
        if server.env:
            result["env"] = dict(server.env)
        if server.cwd:
            result["cwd"] = server.cwd
    else:
        # The reference implementation's spellings, so its readers accept our exports.
        kind = "sse" if server.transport == "sse" else "streamableHttp"
        result = {"type": kind, "url": server.url}
        if server.headers:
            result["headers"] = dict(server.headers)
    if server.timeout_seconds is not None:
        result["timeout"] = server.timeout_seconds
    if server.sse_read_timeout is not None:
        result["sse_read_timeout"] = server.sse_read_timeout
    return result


def _transport(raw: Mapping[str, Any], where: str, problems: list[str]) -> str | None:
    """The normalised transport of a server's settings, or None after reporting why not."""
    has_command, has_url = "command" in raw, "url" in raw
    if has_command == has_url:
        problems.append(
            f"{where}: give either `command` (a stdio server) or `url` (an HTTP or SSE server)"
        )
        return None
    declared = raw.get("type", raw.get("transport"))
    transport: str | None
    if declared is None:
        path = "" if has_command else urlsplit(str(raw["url"])).path.rstrip("/")
        transport = (
            "stdio" if has_command else "sse" if path.endswith("/sse") else "streamable_http"
        )
    else:
        transport = _TRANSPORT_NAMES.get(str(declared).lower())
        if transport is None:
            problems.append(
                f"{where}, field 'type': unknown transport {declared!r}; "
                "use stdio, streamableHttp or sse"
            )
            return None
        if (transport == "stdio") != has_command:
            needs = "`command`" if transport == "stdio" else "`url`"
            problems.append(f"{where}, field 'type': a {declared} server needs {needs}")
            return None
    if has_command and (not isinstance(raw["command"], str) or not raw["command"].strip()):
        problems.append(f"{where}, field 'command': must be a non-empty string")
        return None
    return transport


def _string_map(raw: Any, where: str, problems: list[str]) -> dict[str, str]:
    """A mapping of strings to strings (env, headers), or {} after reporting why not."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping) or not _is_string_list([*raw, *raw.values()]):
        problems.append(f'{where}: must map names to strings (quote numbers: "8080")')
        return {}
    return dict(raw)


def _is_string_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _positive_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0
