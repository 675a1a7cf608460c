"""Prompts that help an agent plan a workflow with the node knowledge tools."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from mcp import types

from mcp_endpoint.features import extensions
from mcp_endpoint.features.resources import complete_template_argument


class PromptError(ValueError):
    """An unknown prompt or a missing argument; the message says which."""


PROMPTS: dict[str, types.Prompt] = {
    "design_workflow": types.Prompt(
        name="design_workflow",
        title="Design a workflow",
        description="Plan a workflow for a goal, choosing nodes from the catalog.",
        arguments=[
            types.PromptArgument(
                name="goal", description="What the workflow should achieve.", required=True
            )
        ],
    ),
    "explain_node": types.Prompt(
        name="explain_node",
        title="Explain a node",
        description="Explain how to configure one node of the catalog.",
        arguments=[
            types.PromptArgument(name="node_type", description="e.g. ACTION", required=True),
            types.PromptArgument(name="subtype", description="e.g. HTTP_REQUEST", required=True),
        ],
    ),
}


def _text(arguments: dict[str, str], name: str) -> str:
    if name == "design_workflow":
        return (
            f"Design a workflow that achieves this goal: {arguments['goal']}\n\n"
            "1. Call search_nodes with short descriptions of each step to find candidate nodes.\n"
            "2. Call get_node_details for the nodes you pick, and use their configurations, "
            "defaults and examples.\n"
            "3. Start with a TRIGGER node. For a person's approval use one HUMAN_IN_THE_LOOP "
            "node and route on its confirmed / rejected / unrelated / timeout ports; do not add "
            "IF or AI_AGENT nodes to classify the reply.\n"
            "4. Answer with the list of nodes (type, subtype, configuration) and how they connect."
        )
    return (
        f"Call get_node_details for node_type {arguments['node_type']} and subtype "
        f"{arguments['subtype']}, then explain what the node does, which configurations must "
        "be set, what it outputs, and show one example configuration."
    )


def _render(arguments: dict[str, str], context: Any, name: str = "") -> types.GetPromptResult:
    prompt = PROMPTS[name]
    return types.GetPromptResult(
        description=prompt.description,
        messages=[
            types.PromptMessage(
                role="user", content=types.TextContent(type="text", text=_text(arguments, name))
            )
        ],
    )


# How each prompt is rendered: (arguments, call context) → a result, or a generator that asks
# the client for input (see `interaction`).
HANDLERS: dict[str, Callable[[dict[str, str], Any], Any]] = {
    name: partial(_render, name=name) for name in PROMPTS
}


def all_prompts() -> dict[str, types.Prompt]:
    """This server's prompts, then the extensions' (mcp_endpoint/features/extensions.py)."""
    extra = extensions.installed().prompts
    return {**PROMPTS, **{name: prompt for name, (prompt, _) in extra.items()}}


def prompt_handler(name: str, arguments: dict[str, str] | None) -> Callable[..., Any]:
    """The handler of a prompt, once its arguments are checked; raises `PromptError`."""
    prompts = all_prompts()
    prompt = prompts.get(name)
    if prompt is None:
        raise PromptError(f"Unknown prompt {name!r}; available: {', '.join(prompts)}.")
    arguments = arguments or {}
    missing = [a.name for a in prompt.arguments or [] if a.required and not arguments.get(a.name)]
    if missing:
        raise PromptError(f"Prompt {name!r} needs the argument(s): {', '.join(missing)}.")
    own = HANDLERS.get(name)
    return own if own is not None else extensions.installed().prompts[name][1]


def complete_prompt_argument(
    prompt: str, name: str, value: str, context: dict[str, str]
) -> list[str]:
    """Completions for `explain_node`'s node_type and subtype arguments."""
    if prompt == "explain_node":
        return complete_template_argument(name, value, context)
    return []
