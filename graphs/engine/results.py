"""What an mcp node's call returns becomes its output.

As seed 003 and the reference implementation: the result's ``structuredContent`` when it has
one; else its first text block, parsed as JSON when it is JSON, else the text itself. A result
with no text but images or audio becomes the structure of seed 004,
``{"text": "", "images": [{"data", "mime_type"}], "audio": [...]}``; any other content (a
resource) becomes its first block as JSON; no content at all becomes null.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.types import AudioContent, CallToolResult, ImageContent, TextContent


def tool_output(result: CallToolResult) -> Any:
    """The output of a node whose call returned this (non-error) result."""
    if result.structured_content is not None:
        return result.structured_content
    for block in result.content:
        if isinstance(block, TextContent):
            return _json_or_text(block.text)
    media = {
        "images": _media(result, ImageContent),
        "audio": _media(result, AudioContent),
    }
    if media["images"] or media["audio"]:
        return {"text": "", **media}
    if result.content:
        return result.content[0].model_dump(mode="json", by_alias=True, exclude_none=True)
    return None


def error_text(result: CallToolResult) -> str:
    """What an error result says, for the message of the failed node."""
    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    return "\n".join(texts) or "the tool reported an error without a message"


def _json_or_text(text: str) -> Any:
    try:
        # NaN and Infinity are not JSON, though Python's parser accepts them.
        return json.loads(text, parse_constant=_refuse)
    except ValueError:
        return text


def _refuse(constant: str) -> Any:
    raise ValueError(constant)


def _media(
    result: CallToolResult, kind: type[ImageContent] | type[AudioContent]
) -> list[dict[str, str]]:
    return [
        {"data": block.data, "mime_type": block.mime_type}
        for block in result.content
        if isinstance(block, kind)
    ]
