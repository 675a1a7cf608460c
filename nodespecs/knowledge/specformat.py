"""The unified node spec format: parsing, validation and legacy normalisation.

Plain Python (pydantic only): the admin, the catalog loader, YAML import and the provider
refresh all turn their input into a `SpecDocument` through `parse_spec_document`, so one set
of rules holds everywhere and every error names the field and the problem.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

NODE_TYPES: tuple[str, ...] = (
    "TRIGGER",
    "AI_AGENT",
    "ACTION",
    "EXTERNAL_ACTION",
    "FLOW",
    "HUMAN_IN_THE_LOOP",
    "TOOL",
    "MEMORY",
)

PARAM_TYPES: tuple[str, ...] = (
    "string",
    "integer",
    "float",
    "number",
    "boolean",
    "object",
    "array",
)
NUMERIC_TYPES = frozenset({"integer", "float", "number"})

# The four outcomes a HUMAN_IN_THE_LOOP node's built-in response analysis routes to.
HIL_CLASSIFICATIONS: tuple[str, ...] = ("confirmed", "rejected", "unrelated", "timeout")

# Legacy ParameterDef types and loose spellings, mapped to the unified types.
LEGACY_TYPE_NAMES: dict[str, str] = {
    "str": "string",
    "text": "string",
    "url": "string",
    "email": "string",
    "enum": "string",
    "select": "string",
    "int": "integer",
    "double": "float",
    "decimal": "float",
    "bool": "boolean",
    "dict": "object",
    "json": "object",
    "list": "array",
}

SUBTYPE_PATTERN = re.compile(r"^[A-Z][A-Z0-9_]*$")


class SpecFormatError(ValueError):
    """A spec document broke the format; `problems` maps a field path to what is wrong."""

    def __init__(self, problems: dict[str, str]):
        self.problems = problems
        super().__init__("; ".join(f"{field}: {message}" for field, message in problems.items()))


def _matches_type(value: Any, param_type: str) -> bool:
    if param_type == "string":
        return isinstance(value, str)
    if param_type == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if param_type in ("float", "number"):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if param_type == "boolean":
        return isinstance(value, bool)
    if param_type == "object":
        return isinstance(value, dict)
    return isinstance(value, list)


class ParamDef(BaseModel):
    """One configuration, input or output parameter."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["string", "integer", "float", "number", "boolean", "object", "array"]
    description: str = Field(min_length=1)
    default: Any = None
    required: bool = False
    min: int | float | None = None
    max: int | float | None = None
    options: list[str | int | float | bool] | None = None
    validation_pattern: str | None = None
    sensitive: bool = False

    @model_validator(mode="after")
    def _check_consistency(self) -> ParamDef:
        if self.default is not None and not _matches_type(self.default, self.type):
            raise ValueError(f"default {self.default!r} is not of type {self.type}")
        if (self.min is not None or self.max is not None) and self.type not in NUMERIC_TYPES:
            raise ValueError(f"min/max apply to numbers only, not to type {self.type}")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is greater than max {self.max}")
        if isinstance(self.default, (int, float)) and not isinstance(self.default, bool):
            if self.min is not None and self.default < self.min:
                raise ValueError(f"default {self.default} is below min {self.min}")
            if self.max is not None and self.default > self.max:
                raise ValueError(f"default {self.default} is above max {self.max}")
        if self.options is not None:
            if not self.options:
                raise ValueError("options is empty: list the allowed values or remove it")
            if self.default is not None and self.default not in self.options:
                raise ValueError(f"default {self.default!r} is not one of options {self.options}")
        if self.validation_pattern is not None:
            try:
                re.compile(self.validation_pattern)
            except re.error as exc:
                raise ValueError(f"validation_pattern is not a valid regex: {exc}") from None
        return self


class DataFormat(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mime_type: str = "application/json"
    schema_: str | None = Field(default=None, alias="schema")
    examples: list[str] = Field(default_factory=list)


class PortDef(BaseModel):
    """A legacy connection port, kept for clients of the old format."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str = Field(min_length=1)
    type: str = "main"
    required: bool = False
    description: str = ""
    max_connections: int = -1
    data_format: DataFormat | None = None
    validation_schema: dict[str, Any] | None = None


class Example(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    description: str = Field(min_length=1)
    configurations: dict[str, Any] = Field(default_factory=dict)
    input_example: dict[str, Any] = Field(default_factory=dict)
    expected_output: dict[str, Any] = Field(default_factory=dict)


class SpecDocument(BaseModel):
    """A node spec in the unified format: what the catalog files, import and export hold."""

    model_config = ConfigDict(extra="forbid")

    node_type: Literal[
        "TRIGGER",
        "AI_AGENT",
        "ACTION",
        "EXTERNAL_ACTION",
        "FLOW",
        "HUMAN_IN_THE_LOOP",
        "TOOL",
        "MEMORY",
    ]
    subtype: str
    version: str = "1.0.0"
    display_name: str = ""
    description: str = Field(min_length=1)
    aliases: list[str] = Field(default_factory=list)
    configurations: dict[str, ParamDef] = Field(default_factory=dict)
    input_params: dict[str, ParamDef] = Field(default_factory=dict)
    output_params: dict[str, ParamDef] = Field(default_factory=dict)
    input_ports: list[PortDef] = Field(default_factory=list)
    output_ports: list[PortDef] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    attached_nodes: list[str] = Field(default_factory=list)
    examples: list[Example] = Field(default_factory=list)

    @field_validator("subtype")
    @classmethod
    def _check_subtype(cls, value: str) -> str:
        if not SUBTYPE_PATTERN.match(value):
            raise ValueError(
                f"{value!r} is not a valid subtype: use UPPER_SNAKE_CASE such as HTTP_REQUEST"
            )
        return value

    @field_validator("version")
    @classmethod
    def _check_version(cls, value: str) -> str:
        if not re.fullmatch(r"\d+\.\d+\.\d+", value):
            raise ValueError(f"{value!r} is not a version: use MAJOR.MINOR.PATCH such as 1.0.0")
        return value

    @field_validator("aliases")
    @classmethod
    def _check_aliases(cls, value: list[str]) -> list[str]:
        bad = [alias for alias in value if not SUBTYPE_PATTERN.match(alias)]
        if bad:
            raise ValueError(f"aliases must be UPPER_SNAKE_CASE subtypes; not {bad}")
        return value

    @field_validator("tags")
    @classmethod
    def _normalise_tags(cls, value: list[str]) -> list[str]:
        tags = [tag.strip().lower() for tag in value if tag.strip()]
        return list(dict.fromkeys(tags))

    @model_validator(mode="after")
    def _check_type_rules(self) -> SpecDocument:
        if self.attached_nodes and self.node_type != "AI_AGENT":
            raise ValueError("attached_nodes: only AI_AGENT specs can have attached nodes")
        for attached in self.attached_nodes:
            if attached.split("/", 1)[0] not in ("TOOL", "MEMORY"):
                raise ValueError(
                    f"attached_nodes: {attached!r} is not a TOOL or MEMORY node "
                    "(write TOOL, MEMORY or TYPE/SUBTYPE such as TOOL/HTTP_TOOL)"
                )
        if self.node_type == "HUMAN_IN_THE_LOOP":
            ports = [port.name for port in self.output_ports]
            missing = [name for name in HIL_CLASSIFICATIONS if name not in ports]
            if missing:
                raise ValueError(
                    "output_ports: a HUMAN_IN_THE_LOOP spec routes its built-in response "
                    f"classification to the ports {list(HIL_CLASSIFICATIONS)}; missing {missing}"
                )
        return self

    def key(self) -> tuple[str, str]:
        return (self.node_type, self.subtype)


def normalise_node_type(raw: str) -> str:
    """Upper-case a node type and drop a `_NODE` suffix: `action_node` → `ACTION`."""
    name = raw.strip().upper().replace("-", "_").replace(" ", "_")
    if name.endswith("_NODE"):
        name = name[: -len("_NODE")]
    return {"HUMAN_LOOP": "HUMAN_IN_THE_LOOP", "HIL": "HUMAN_IN_THE_LOOP"}.get(name, name)


def _legacy_param(raw: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Turn a legacy ParameterDef dict into (name, unified param dict)."""
    param = dict(raw)
    name = str(param.pop("name", "")).strip()
    unified: dict[str, Any] = {}
    raw_type = str(param.pop("type", "string")).lower()
    unified["type"] = LEGACY_TYPE_NAMES.get(raw_type, raw_type)
    unified["description"] = param.pop("description", "") or name.replace("_", " ")
    if "default_value" in param:
        unified["default"] = param.pop("default_value")
    options = param.pop("enum_values", None) or param.pop("options", None)
    if options:
        unified["options"] = options
    for key in ("default", "required", "min", "max", "validation_pattern", "sensitive"):
        if param.get(key) is not None:
            unified[key] = param.pop(key)
        else:
            param.pop(key, None)
    return name, unified


def normalise_legacy(raw: dict[str, Any]) -> dict[str, Any]:
    """Rewrite a spec in the old `parameters`/ports form (or with `type`/`_NODE` names) into
    the unified form. A spec already unified passes through unchanged."""
    document = dict(raw)
    if "type" in document and "node_type" not in document:
        document["node_type"] = document.pop("type")
    if isinstance(document.get("node_type"), str):
        document["node_type"] = normalise_node_type(document["node_type"])
    for legacy_key, key in (
        ("input_params_schema", "input_params"),
        ("output_params_schema", "output_params"),
    ):
        if legacy_key in document and key not in document:
            document[key] = document.pop(legacy_key)
    parameters = document.pop("parameters", None)
    if parameters:
        configurations = dict(document.get("configurations") or {})
        for entry in parameters:
            if isinstance(entry, dict):
                name, unified = _legacy_param(entry)
                configurations.setdefault(name, unified)
        document["configurations"] = configurations
    for derived in ("default_configurations", "default_input_params", "default_output_params"):
        document.pop(derived, None)
    return document


def _field_path(location: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in location) or "spec"


def parse_spec_document(raw: Any) -> SpecDocument:
    """Validate a spec given as a dict (unified or legacy) and return it parsed.

    Raises `SpecFormatError` whose `problems` name each bad field, for example
    `configurations.timeout: default 'ten' is not of type integer`.
    """
    if not isinstance(raw, dict):
        raise SpecFormatError({"spec": f"expected a mapping of fields, got {type(raw).__name__}"})
    try:
        return SpecDocument.model_validate(normalise_legacy(raw))
    except ValidationError as exc:
        problems: dict[str, str] = {}
        for error in exc.errors():
            message = error["msg"].removeprefix("Value error, ")
            if error["type"] == "extra_forbidden":
                message = "unknown field: remove it or check its spelling"
            elif error["type"] == "list_type":
                message = "expected a list: write [] for none"
            elif error["type"] == "dict_type":
                message = "expected a mapping of names to values: write {} for none"
            elif error["type"] == "literal_error" and error["loc"] == ("node_type",):
                message = (
                    f"{error['input']!r} is not a node type; use one of {', '.join(NODE_TYPES)}"
                )
            field = _field_path(error["loc"])
            # Whole-document rules name their field at the front of the message.
            head, _, rest = message.partition(": ")
            if field == "spec" and rest and head in SpecDocument.model_fields:
                field, message = head, rest
            problems.setdefault(field, message)
        raise SpecFormatError(problems) from None


def dump_spec_document(document: SpecDocument) -> dict[str, Any]:
    """The document as plain data, without empty optional fields (for storage and YAML)."""
    return document.model_dump(mode="json", by_alias=True, exclude_none=True)


# libyaml's C parser when it is installed (ten times faster on the catalog), else pure Python.
SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
SafeDumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


# JSON Schemas of the admin's structured editor (nodespecs/admin/forms.py), in the dialect of
# django-jsonform. A form cannot offer every JSON shape, so the editor holds parameters as a
# list of rows with their name in the row, and free-form values (a default, options, an
# example's payloads) as text; nodespecs/admin/forms.py turns rows back into a document, which is
# then validated by `parse_spec_document` like any other.
PARAM_ROW_SCHEMA: dict[str, Any] = {
    "type": "object",
    "title": "Parameter",
    "properties": {
        # In the order of the admin's grid (templates/admin/nodespecs/nodespec/change_form.html).
        "name": {"type": "string"},
        "type": {"type": "string", "choices": list(PARAM_TYPES)},
        "default": {"type": "string"},
        "min": {"type": "number"},
        "max": {"type": "number"},
        "validation_pattern": {"type": "string"},
        "required": {"type": "boolean"},
        "sensitive": {"type": "boolean"},
        "description": {"type": "string", "widget": "textarea"},
        "options": {"type": "string", "widget": "textarea", "title": "Options (one a line)"},
    },
}
PARAMS_EDITOR_SCHEMA: dict[str, Any] = {"type": "array", "items": PARAM_ROW_SCHEMA}

EXAMPLE_PAYLOADS: tuple[str, ...] = ("configurations", "input_example", "expected_output")
EXAMPLES_EDITOR_SCHEMA: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "title": "Example",
        "properties": {
            "name": {"type": "string"},
            "description": {"type": "string", "widget": "textarea"},
            **{payload: {"type": "string", "widget": "textarea"} for payload in EXAMPLE_PAYLOADS},
        },
    },
}

# Lists of names (tags, aliases, attached nodes) are edited one item per input.
STRING_LIST_EDITOR_SCHEMA: dict[str, Any] = {"type": "array", "items": {"type": "string"}}

# The editor shows every field of the format: a field added to a model must be added here.
assert set(PARAM_ROW_SCHEMA["properties"]) == {"name", *ParamDef.model_fields}
assert set(EXAMPLES_EDITOR_SCHEMA["items"]["properties"]) == set(Example.model_fields)
