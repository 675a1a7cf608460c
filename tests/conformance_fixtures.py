"""The fixture tools, resources and prompts that the MCP conformance suite calls by name.

A test extension, never imported by the product: a server started with
`MCP_EXTENSION_MODULES=tests.conformance_fixtures` (from the repository's root, as
tests/e2e/test_conformance.py does) serves them beside the real tools (its `EXTENSION`, which the endpoint asks for), so the
whole `@modelcontextprotocol/conformance` suite can run against it (docs/conformance.md).
They exercise the protocol (content types, progress, logging, sampling, elicitation,
input-required rounds, tasks), not the catalog. The tasks extension's tools (`slow_compute`,
`failing_job`, …) run as real tasks, through `task_extension.task_tool`.
"""

# ruff: noqa: E501 (fixture tables read best one row per line)

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from mcp import types

from mcp_endpoint.calls import tool_tasks
from mcp_endpoint.calls.task_extension import task_tool
from mcp_endpoint.calls.tool_tasks import START_TASK
from mcp_endpoint.features.extensions import Extension, ExtraTool
from mcp_endpoint.jsonrpc.context import CallContext
from mcp_endpoint.jsonrpc.errors import RpcError
from mcp_endpoint.jsonrpc.interaction import InputRequest

PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJ"
    "AAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="


def text(value: str) -> types.TextContent:
    return types.TextContent(type="text", text=value)


def image() -> types.ImageContent:
    return types.ImageContent(type="image", data=PNG, mime_type="image/png")


def embedded(uri: str, mime_type: str, value: str) -> types.EmbeddedResource:
    return types.EmbeddedResource(
        type="resource",
        resource=types.TextResourceContents(uri=uri, mime_type=mime_type, text=value),
    )


def result(*content: Any, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=list(content), is_error=is_error)


def elicit(key: str, message: str, properties: dict[str, Any], required: list[str]) -> InputRequest:
    schema = {"type": "object", "properties": properties, "required": required}
    return InputRequest(key, "elicitation/create", {"message": message, "requestedSchema": schema})


def sample(key: str, prompt: str, max_tokens: int = 100) -> InputRequest:
    message = {"role": "user", "content": {"type": "text", "text": prompt}}
    return InputRequest(
        key, "sampling/createMessage", {"messages": [message], "maxTokens": max_tokens}
    )


def roots(key: str) -> InputRequest:
    return InputRequest(key, "roots/list", {})


def _needs(context: CallContext, capability: str) -> None:
    if capability not in context.client_capabilities:
        raise RpcError(
            types.MISSING_REQUIRED_CLIENT_CAPABILITY,
            f"This tool needs the client capability {capability!r}.",
            {"requiredCapabilities": {capability: {}}},
        )


# Tools: each (arguments, context) → a result, or a generator that asks for input.


def _progress(arguments: dict[str, Any], context: CallContext) -> types.CallToolResult:
    for step in (0, 50, 100):
        context.progress(step, 100, f"{step}%")
    return result(text("Progress test completed"))


def _logging(arguments: dict[str, Any], context: CallContext) -> types.CallToolResult:
    for message in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        context.log("info", message)
    return result(text("Logging test completed"))


def _sampling(arguments: dict[str, Any], context: CallContext):
    answers = yield [sample("answer", arguments.get("prompt", ""))]
    return result(text(f"LLM response: {answers['answer']['content']['text']}"))


def _elicitation(arguments: dict[str, Any], context: CallContext):
    properties = {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    }
    answers = yield [
        elicit("info", arguments.get("message", ""), properties, ["username", "email"])
    ]
    return result(text(f"User response: {json.dumps(answers['info'])}"))


def _sep1034_defaults(arguments: dict[str, Any], context: CallContext):
    properties = {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {
            "type": "string",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "default": True},
    }
    answers = yield [elicit("info", "Please review your information", properties, [])]
    return result(text(f"Elicitation completed: {json.dumps(answers['info'])}"))


def _sep1330_enums(arguments: dict[str, Any], context: CallContext):
    properties = {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    }
    answers = yield [elicit("choice", "Please choose", properties, [])]
    return result(text(f"Elicitation completed: {json.dumps(answers['choice'])}"))


def _missing_capability(arguments: dict[str, Any], context: CallContext) -> types.CallToolResult:
    _needs(context, "sampling")
    return result(text("The client can sample."))


def _ask_name(arguments: dict[str, Any], context: CallContext):
    properties = {"name": {"type": "string"}}
    answers = yield [elicit("user_name", "What is your name?", properties, ["name"])]
    return result(text(f"Hello, {answers['user_name'].get('content', {}).get('name', '')}!"))


def _ask_capital(arguments: dict[str, Any], context: CallContext):
    answers = yield [sample("capital_question", "What is the capital of France?")]
    return result(text(f"The client says: {answers['capital_question']['content']['text']}"))


def _ask_roots(arguments: dict[str, Any], context: CallContext):
    answers = yield [roots("client_roots")]
    names = [root.get("uri") for root in answers["client_roots"].get("roots", [])]
    return result(text(f"Client roots: {', '.join(names)}"))


def _ask_confirmation(arguments: dict[str, Any], context: CallContext):
    properties = {"ok": {"type": "boolean"}}
    yield [elicit("confirm", "Please confirm", properties, ["ok"])]
    return result(text("state-ok"))


def _ask_several(arguments: dict[str, Any], context: CallContext):
    yield [
        elicit("user_name", "What is your name?", {"name": {"type": "string"}}, ["name"]),
        sample("greeting", "Generate a greeting", 50),
        roots("client_roots"),
    ]
    return result(text("All inputs received."))


def _ask_twice(arguments: dict[str, Any], context: CallContext):
    first = yield [
        elicit("step1", "Step 1: What is your name?", {"name": {"type": "string"}}, ["name"])
    ]
    second = yield [
        elicit(
            "step2",
            "Step 2: What is your favorite color?",
            {"color": {"type": "string"}},
            ["color"],
        )
    ]
    return result(text(f"Done: {json.dumps(first['step1'])} {json.dumps(second['step2'])}"))


def _ask_within_capabilities(arguments: dict[str, Any], context: CallContext):
    asks = []
    if "elicitation" in context.client_capabilities:
        asks.append(
            elicit("user_name", "What is your name?", {"name": {"type": "string"}}, ["name"])
        )
    if "sampling" in context.client_capabilities:
        asks.append(sample("question", "Say hello"))
    if "roots" in context.client_capabilities or not asks:
        asks.append(roots("client_roots"))
    yield asks
    return result(text("Used only what the client can do."))


def _json_schema_tool(arguments: dict[str, Any], context: CallContext) -> types.CallToolResult:
    return result(text(f"Received: {json.dumps(arguments)}"))


# The tasks extension's tools (SEP-2663): `task_tool` makes a call a task when the client
# declared the extension; `tool_tasks.sleep` is a wait that cancelling the task interrupts.

# The longest slow_compute will sleep: a client without the tasks extension holds a thread
# that long.
SLOW_COMPUTE_MAX_SECONDS = 120


def _greet(arguments: dict[str, Any], context: CallContext) -> types.CallToolResult:
    return result(text(f"Hello, {arguments.get('name', '')}!"))


def _slow_compute(arguments: dict[str, Any], context: CallContext) -> types.CallToolResult:
    asked = arguments.get("seconds", 0)
    seconds = min(max(asked, 0), SLOW_COMPUTE_MAX_SECONDS) if isinstance(asked, int | float) else 0
    tool_tasks.sleep(seconds)
    return result(text(f"Computed {arguments.get('label', '')!r} in {seconds:g} s."))


def _failing_job(arguments: dict[str, Any], context: CallContext) -> types.CallToolResult:
    tool_tasks.sleep(1)
    return result(text("The job failed, as this one always does."), is_error=True)


def _protocol_error_job(arguments: dict[str, Any], context: CallContext) -> types.CallToolResult:
    tool_tasks.sleep(0.2)
    raise RpcError(types.INTERNAL_ERROR, "The job broke down, as this one always does.")


def _accepted(answer: dict[str, Any]) -> dict[str, Any]:
    """The content of an accepted elicitation; nothing if the user declined or cancelled."""
    return (answer.get("content") or {}) if answer.get("action") == "accept" else {}


def _confirm_delete(arguments: dict[str, Any], context: CallContext):
    filename = arguments.get("filename", "")
    yield START_TASK
    answers = yield [
        elicit("confirm", f"Delete {filename}?", {"confirm": {"type": "boolean"}}, ["confirm"])
    ]
    deleted = _accepted(answers["confirm"]).get("confirm") is True
    return result(text(f"Deleted {filename}." if deleted else f"Kept {filename}."))


def _multi_input(arguments: dict[str, Any], context: CallContext):
    yield START_TASK
    answers = yield [
        elicit("name", "What is your name?", {"name": {"type": "string"}}, ["name"]),
        elicit("confirm", "Go on?", {"confirm": {"type": "boolean"}}, ["confirm"]),
    ]
    name, go_on = (
        _accepted(answers["name"]).get("name"),
        _accepted(answers["confirm"]).get("confirm"),
    )
    return result(text(f"Name: {name}; go on: {go_on}."))


def _greet_by_name_later(arguments: dict[str, Any], context: CallContext):
    answers = yield [
        elicit("user_name", "What is your name?", {"name": {"type": "string"}}, ["name"])
    ]
    yield START_TASK
    tool_tasks.sleep(0.2)
    return result(text(f"Hello, {_accepted(answers['user_name']).get('name', '')}!"))


JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}

NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}}


def _string_arguments(*names: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": "string"} for name in names},
        "required": list(names),
    }


def _fixed(value: types.CallToolResult) -> Callable[[dict[str, Any], CallContext], Any]:
    return lambda arguments, context: value


TOOLS: list[tuple[str, str, dict[str, Any], Callable[[dict[str, Any], CallContext], Any]]] = [
    ("test_simple_text", "Returns simple text.", NO_ARGUMENTS,
     _fixed(result(text("This is a simple text response for testing.")))),
    ("test_image_content", "Returns an image.", NO_ARGUMENTS, _fixed(result(image()))),
    ("test_audio_content", "Returns audio.", NO_ARGUMENTS,
     _fixed(result(types.AudioContent(type="audio", data=WAV, mime_type="audio/wav")))),
    ("test_embedded_resource", "Returns an embedded resource.", NO_ARGUMENTS,
     _fixed(result(embedded("test://embedded-resource", "text/plain",
                             "This is an embedded resource content.")))),
    ("test_multiple_content_types", "Returns text, an image and a resource.", NO_ARGUMENTS,
     _fixed(result(text("Multiple content types test:"), image(),
                   embedded("test://mixed-content-resource", "application/json",
                            '{"test":"data","value":123}')))),
    ("test_error_handling", "Always fails, in-band.", NO_ARGUMENTS,
     _fixed(result(text("This tool intentionally returns an error for testing"), is_error=True))),
    ("test_tool_with_progress", "Reports progress 0, 50, 100.", NO_ARGUMENTS, _progress),
    ("test_tool_with_logging", "Logs three messages.", NO_ARGUMENTS, _logging),
    ("test_logging_tool", "Logs three messages.", NO_ARGUMENTS, _logging),
    ("test_sampling", "Asks the client's model.", _string_arguments("prompt"), _sampling),
    ("test_elicitation", "Asks the user.", _string_arguments("message"), _elicitation),
    ("test_elicitation_sep1034_defaults", "Asks with defaults.", NO_ARGUMENTS, _sep1034_defaults),
    ("test_elicitation_sep1330_enums", "Asks with enums.", NO_ARGUMENTS, _sep1330_enums),
    ("json_schema_2020_12_tool", "Takes a JSON Schema 2020-12 input.", JSON_SCHEMA_2020_12,
     _json_schema_tool),
    ("test_missing_capability", "Needs the sampling capability.", NO_ARGUMENTS, _missing_capability),
    ("test_streaming_elicitation", "Asks the user.", NO_ARGUMENTS, _ask_name),
    ("test_input_required_result_elicitation", "Asks a name.", NO_ARGUMENTS, _ask_name),
    ("test_input_required_result_sampling", "Asks the model.", NO_ARGUMENTS, _ask_capital),
    ("test_input_required_result_list_roots", "Asks for roots.", NO_ARGUMENTS, _ask_roots),
    ("test_input_required_result_request_state", "Asks to confirm.", NO_ARGUMENTS, _ask_confirmation),
    ("test_input_required_result_multiple_inputs", "Asks three things.", NO_ARGUMENTS, _ask_several),
    ("test_input_required_result_multi_round", "Asks twice.", NO_ARGUMENTS, _ask_twice),
    ("test_input_required_result_tampered_state", "Asks to confirm.", NO_ARGUMENTS, _ask_confirmation),
    ("test_input_required_result_capabilities", "Asks what the client can answer.", NO_ARGUMENTS,
     _ask_within_capabilities),
    ("test_header_param", "Takes a region mirrored in a header.",
     {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}},
     _json_schema_tool),
    ("greet", "Greets by name, at once (never a task).", _string_arguments("name"), _greet),
    ("slow_compute", "Sleeps `seconds`, then answers; a task when the client can follow one.",
     {"type": "object", "properties": {"seconds": {"type": "number", "minimum": 0,
                                                   "maximum": SLOW_COMPUTE_MAX_SECONDS},
                                       "label": {"type": "string"}}},
     task_tool("slow_compute", _slow_compute)),
    ("failing_job", "Fails in-band after a second; only ever a task.", NO_ARGUMENTS,
     task_tool("failing_job", _failing_job, "required")),
    ("protocol_error_job", "Fails with a JSON-RPC error; a task when it can be.", NO_ARGUMENTS,
     task_tool("protocol_error_job", _protocol_error_job)),
    ("confirm_delete", "Asks to confirm deleting a file, from within its task.",
     _string_arguments("filename"), task_tool("confirm_delete", _confirm_delete)),
    ("multi_input", "Asks two things at once, from within its task.", NO_ARGUMENTS,
     task_tool("multi_input", _multi_input)),
    ("test_tool_with_task", "Asks a name in the request, then greets from a task.", NO_ARGUMENTS,
     task_tool("test_tool_with_task", _greet_by_name_later, "required")),
]  # fmt: skip


# Prompts.


def _prompt(*messages: types.PromptMessage) -> types.GetPromptResult:
    return types.GetPromptResult(messages=list(messages))


def _user(content: Any) -> types.PromptMessage:
    return types.PromptMessage(role="user", content=content)


def _prompt_with_context(arguments: dict[str, str], context: CallContext):
    answers = yield [
        elicit(
            "user_context",
            "What context should the prompt use?",
            {"context": {"type": "string"}},
            ["context"],
        )
    ]
    chosen = answers["user_context"].get("content", {}).get("context", "")
    return _prompt(_user(text(f"Use this context: {chosen}")))


PROMPTS: list[tuple[types.Prompt, Callable[[dict[str, str], CallContext], Any]]] = [
    (types.Prompt(name="test_simple_prompt", description="A prompt without arguments."),
     lambda a, c: _prompt(_user(text("This is a simple prompt for testing.")))),
    (types.Prompt(name="test_prompt_with_arguments", description="A prompt with arguments.",
                  arguments=[types.PromptArgument(name="arg1", description="First", required=True),
                             types.PromptArgument(name="arg2", description="Second", required=True)]),
     lambda a, c: _prompt(_user(text(
         f"Prompt with arguments: arg1='{a['arg1']}', arg2='{a['arg2']}'")))),
    (types.Prompt(name="test_prompt_with_embedded_resource", description="Embeds a resource.",
                  arguments=[types.PromptArgument(name="resourceUri", description="URI", required=True)]),
     lambda a, c: _prompt(
         _user(embedded(a["resourceUri"], "text/plain", "Embedded resource content for testing.")),
         _user(text("Please process the embedded resource above.")))),
    (types.Prompt(name="test_prompt_with_image", description="Shows an image."),
     lambda a, c: _prompt(_user(image()), _user(text("Please analyze the image above.")))),
    (types.Prompt(name="test_input_required_result_prompt", description="Asks for context."),
     _prompt_with_context),
]  # fmt: skip


# Resources.


def _text_resource(uri: str, mime_type: str, value: str) -> Callable[[], list[Any]]:
    return lambda: [types.TextResourceContents(uri=uri, mime_type=mime_type, text=value)]


def _template_reader(uri: str) -> list[Any] | None:
    prefix, suffix = "test://template/", "/data"
    if not (uri.startswith(prefix) and uri.endswith(suffix)):
        return None
    item = uri[len(prefix) : -len(suffix)]
    body = {"id": item, "templateTest": True, "data": f"Data for ID: {item}"}
    return [
        types.TextResourceContents(uri=uri, mime_type="application/json", text=json.dumps(body))
    ]


RESOURCES: list[tuple[types.Resource, Callable[[], list[Any]]]] = [
    (types.Resource(uri="test://static-text", name="static-text", mime_type="text/plain",
                    description="A static text resource."),
     _text_resource("test://static-text", "text/plain",
                    "This is the content of the static text resource.")),
    (types.Resource(uri="test://static-binary", name="static-binary", mime_type="image/png",
                    description="A static binary resource."),
     lambda: [types.BlobResourceContents(uri="test://static-binary", mime_type="image/png", blob=PNG)]),
    (types.Resource(uri="test://watched-resource", name="watched-resource", mime_type="text/plain",
                    description="A resource clients may subscribe to."),
     _text_resource("test://watched-resource", "text/plain", "Watched resource content")),
]  # fmt: skip

TEMPLATE = types.ResourceTemplate(
    uri_template="test://template/{id}/data",
    name="template-data",
    description="Data for an id.",
    mime_type="application/json",
)


EXTENSION = Extension(
    tools={
        name: ExtraTool(
            types.Tool(name=name, description=description, input_schema=schema), handler
        )
        for name, description, schema, handler in TOOLS
    },
    prompts={prompt.name: (prompt, handler) for prompt, handler in PROMPTS},
    resources={str(resource.uri): (resource, reader) for resource, reader in RESOURCES},
    templates=[(TEMPLATE, _template_reader)],
    subscribable={"test://watched-resource"},
)
