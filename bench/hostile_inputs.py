"""What the hostile callers of issue 25 send, built as text: bench/hostile.py sends them, and
the tests that show each is bounded (tests/e2e/test_admission_bounds.py,
tests/graphs/validation/test_counted_reading.py) send the same."""

from __future__ import annotations

from pathlib import Path

#: Workflows a hostile author could save (`burrow` makes a result too deep to answer).
HOSTILE_FILE = Path(__file__).resolve().parent / "graph_files" / "hostile.yaml"
#: Modern (2026-07-28) requests carry their version and capabilities in `_meta`.
MODERN_META = (
    '{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
    '"io.modelcontextprotocol/clientCapabilities":{}}'
)


def many_nodes(count: int) -> str:
    """A definition as YAML text whose one tool has `count` small nodes, about 110 bytes
    each: 6,000 are 660 KB, under the byte limit, and three times the nodes validation reads
    (the issue's flood sent 9,000 in 718 KB)."""
    lines = ["version: '1.0'", "server: {name: big, version: 1.0.0}", "tools:", "- name: big"]
    lines += ["  description: d", "  inputSchema: {type: object}", "  nodes:"]
    lines += [
        f"  - {{id: n{index}, type: transform, transform: {{expr: '$x + {index}'}}, "
        f"next: n{index + 1}, extra: {{a: [1, 2, 3, 4, 5, 6]}}}}"
        for index in range(count)
    ]
    return "\n".join(lines)


def nested_text(depth: int) -> str:
    """JSON text of `depth` levels of arrays, built as text: json.dumps itself gives up past
    Python's recursion limit."""
    return "[" * depth + "1" + "]" * depth


def tool_call_text(name: str, arguments_text: str, request_id: int = 1) -> str:
    """A modern `tools/call` of `name` with arguments given as JSON text."""
    return (
        f'{{"jsonrpc":"2.0","id":{request_id},"method":"tools/call","params":{{"name":"{name}",'
        f'"arguments":{arguments_text},"_meta":{MODERN_META}}}}}'
    )


def initialize_text(client_name: str = "hostile") -> str:
    """A 2025 `initialize`, which opens a session."""
    return (
        '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
        f'"capabilities":{{}},"clientInfo":{{"name":"{client_name}","version":"1"}}}}}}'
    )
