"""The spec admin's forms: a spec's structured fields edited through forms generated from
JSON Schemas (django-jsonform), and the YAML import form.

The editor holds parameters as rows and free-form values as text (see the schemas in
`nodespecs.knowledge.specformat`). The fields here only translate between those rows and the spec
document; what is valid is decided by the model's `clean()`, as for any other way in. A field
posted as the document itself (JSON, as before the editor) is taken unchanged.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django_jsonform.constants import JOIN_SYMBOL
from django_jsonform.widgets import JSONFormWidget

from nodespecs.knowledge.specformat import (
    EXAMPLE_PAYLOADS,
    EXAMPLES_EDITOR_SCHEMA,
    PARAM_ROW_SCHEMA,
    PARAMS_EDITOR_SCHEMA,
    STRING_LIST_EDITOR_SCHEMA,
)
from nodespecs.knowledge.specs import SpecImportError, specs_from_yaml
from nodespecs.models import DOCUMENT_FIELDS, NodeSpec

MAX_IMPORT_BYTES = 2 * 1024 * 1024

# Optional parameter keys whose empty editor value means "not set": the editor shows every
# key of a row and fills the unused ones with these.
_UNSET: tuple[object, ...] = (None, "", [])


def _text_of(value: Any, param_type: Any) -> str:
    """A default or option as the editor shows it: strings as typed, anything else as JSON."""
    if param_type == "string" and isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


# How to write a value of each type, for the message when one does not parse.
_JSON_EXAMPLES = {
    "integer": "5",
    "float": "2.5",
    "number": "2.5",
    "boolean": "true or false",
    "object": '{"key": "value"}',
    "array": '["a", "b"]',
}


def _value_of(text: Any, param_type: Any, where: str) -> Any:
    """A default or option typed in the editor, read back by the parameter's type."""
    if param_type == "string" or not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        example = _JSON_EXAMPLES.get(param_type, '5, true, ["a"] or {"key": "value"}')
        raise forms.ValidationError(
            f"{where} {text!r} is not a JSON {param_type or 'value'}; write it like {example}."
        ) from None


def params_to_rows(params: dict[str, Any]) -> list[dict[str, Any]]:
    """A parameter mapping as editor rows, in order, with the name in each row."""
    rows = []
    for name, param in params.items():
        row = {"name": name, **param}
        if "default" in param:
            row["default"] = _text_of(param["default"], param.get("type"))
        if isinstance(param.get("options"), list):
            row["options"] = "\n".join(
                _text_of(option, param.get("type")) for option in param["options"]
            )
        rows.append(row)
    return rows


def rows_to_params(rows: list[Any]) -> dict[str, Any]:
    """Editor rows back to a parameter mapping; what is left is validated by the model."""
    params: dict[str, Any] = {}
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            raise forms.ValidationError(f"Parameter {number} is not a set of fields.")
        param = {key: value for key, value in row.items() if value not in _UNSET}
        # Type and description stay even when empty, so validation says they are missing.
        param.update({key: row[key] for key in ("type", "description") if key in row})
        name = str(param.pop("name", "")).strip()
        if not name:
            raise forms.ValidationError(f"Parameter {number} has no name: give it one.")
        if name in params:
            raise forms.ValidationError(f"Two parameters are named {name!r}: rename one.")
        param_type = param.get("type")
        if "default" in param:
            param["default"] = _value_of(param["default"], param_type, f"{name}: default")
        if isinstance(param.get("options"), str):
            # Lines are taken as typed (an option may be a tab or a space); empty ones skipped.
            param["options"] = [
                _value_of(line, param_type, f"{name}: option")
                for line in param["options"].splitlines()
                if line
            ]
        params[name] = param
    return params


def examples_to_rows(examples: list[Any]) -> list[Any]:
    """Examples as editor rows: each payload as indented JSON text."""
    return [
        {
            **example,
            **{
                payload: json.dumps(example[payload], indent=2, ensure_ascii=False)
                for payload in EXAMPLE_PAYLOADS
                # Text already: the editor's own rows, shown again after an error.
                if payload in example and not isinstance(example[payload], str)
            },
        }
        if isinstance(example, dict)
        else example
        for example in examples
    ]


def rows_to_examples(rows: list[Any]) -> list[Any]:
    """Editor rows back to examples: payloads given as text are read as JSON."""
    examples = []
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            examples.append(row)
            continue
        example = dict(row)
        for payload in EXAMPLE_PAYLOADS:
            text = example.get(payload)
            if not isinstance(text, str):
                continue
            try:
                example[payload] = json.loads(text) if text.strip() else {}
            except json.JSONDecodeError as exc:
                raise forms.ValidationError(
                    f"Example {number}: {payload} is not valid JSON ({exc.msg} at line "
                    f'{exc.lineno}); write an object such as {{"city": "Paris"}}.'
                ) from None
        examples.append(example)
    return examples


def param_error_map(shown: Any, messages: list[str]) -> dict[str, list[str]]:
    """Where each error of a parameter field belongs in the editor: "count: default 5 is below
    min 10" goes under the default box of the row named count. Keys are django-jsonform's
    paths (row index and key joined by §); an error that names no row stays only in the list
    above the editor."""
    try:
        rows = json.loads(shown)
    except (TypeError, json.JSONDecodeError):
        return {}
    if not isinstance(rows, list):
        return {}
    names = [str(row.get("name", "")).strip() if isinstance(row, dict) else "" for row in rows]
    error_map: dict[str, list[str]] = {}
    for message in messages:
        head, _, rest = message.partition(": ")
        name, _, key = head.partition(".")
        if not rest or name not in names:
            continue
        # The format's messages start with the key they are about: "min 10 is greater…".
        key = key or rest.split(" ", 1)[0]
        if key not in PARAM_ROW_SCHEMA["properties"]:
            key = "name"
        error_map.setdefault(f"{names.index(name)}{JOIN_SYMBOL}{key}", []).append(rest)
    return error_map


class EditorField(forms.JSONField):
    """A JSON model field edited with a JSON Schema form. Subclasses say how the document's
    value becomes the editor's data and back."""

    def to_editor(self, value: Any) -> Any:
        return value

    def from_editor(self, value: Any) -> Any:
        return value

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, forms.fields.InvalidJSONInput):
            return value
        return json.dumps(self.to_editor(value), ensure_ascii=False, cls=self.encoder)

    def to_python(self, value: Any) -> Any:
        return self.from_editor(super().to_python(value))


class ParamsField(EditorField):
    """Configurations, input or output parameters: a mapping in the document, rows in the
    editor. A list is what the editor posts; a mapping is the document itself."""

    def to_editor(self, value: Any) -> Any:
        return params_to_rows(value) if isinstance(value, dict) else value

    def from_editor(self, value: Any) -> Any:
        return rows_to_params(value) if isinstance(value, list) else value


class ExamplesField(EditorField):
    """Examples: a list in both; in the editor each payload is JSON text."""

    def to_editor(self, value: Any) -> Any:
        return examples_to_rows(value) if isinstance(value, list) else value

    def from_editor(self, value: Any) -> Any:
        return rows_to_examples(value) if isinstance(value, list) else value


class IndentedJSONField(forms.JSONField):
    """Shows JSON indented, so a spec author edits a readable document, not one long line."""

    def prepare_value(self, value: Any) -> str:
        if isinstance(value, forms.fields.InvalidJSONInput):
            return value
        return json.dumps(value, indent=2, ensure_ascii=False, cls=self.encoder)


PARAM_FIELDS = ("configurations", "input_params", "output_params")
STRING_LIST_FIELDS = ("aliases", "tags", "attached_nodes")
# The legacy ports stay JSON text: few specs have them, and they sit in a collapsed section.
PORT_FIELDS = ("input_ports", "output_ports")


class NodeSpecForm(forms.ModelForm):
    class Meta:
        model = NodeSpec
        fields = DOCUMENT_FIELDS
        field_classes = {
            **dict.fromkeys(PARAM_FIELDS, ParamsField),
            **dict.fromkeys(STRING_LIST_FIELDS, EditorField),
            **dict.fromkeys(PORT_FIELDS, IndentedJSONField),
            "examples": ExamplesField,
        }
        widgets = {
            **{name: JSONFormWidget(schema=PARAMS_EDITOR_SCHEMA) for name in PARAM_FIELDS},
            **dict.fromkeys(STRING_LIST_FIELDS, JSONFormWidget(schema=STRING_LIST_EDITOR_SCHEMA)),
            **{
                name: forms.Textarea(attrs={"rows": 8, "cols": 100, "class": "vLargeTextField"})
                for name in PORT_FIELDS
            },
            "examples": JSONFormWidget(schema=EXAMPLES_EDITOR_SCHEMA),
            "description": forms.Textarea(attrs={"rows": 4, "cols": 100}),
        }
        help_texts = {
            **dict.fromkeys(
                PARAM_FIELDS,
                "Default and options: as typed for a string parameter, JSON for the other "
                'types (5, true, ["a"], {}). An empty box means not set.',
            ),
            "examples": "Configurations, input and expected output are JSON objects.",
        }

    def full_clean(self) -> None:
        super().full_clean()
        # Besides the list above the editor, mark the box each parameter error is about.
        for name in PARAM_FIELDS:
            if self.is_bound and name in self.errors:
                messages = [str(message) for message in self.errors[name]]
                error_map = param_error_map(self[name].value(), messages)
                self.fields[name].widget.add_error(error_map)


class ImportForm(forms.Form):
    file = forms.FileField(
        required=False, help_text="A .yaml file with one spec or a list of specs."
    )
    text = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 16, "cols": 100}),
        label="or paste YAML",
    )

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        upload = data.get("file")
        if upload is not None:
            if upload.size > MAX_IMPORT_BYTES:
                raise forms.ValidationError(
                    f"The file is larger than {MAX_IMPORT_BYTES // 1024} KiB."
                )
            try:
                data["text"] = upload.read().decode("utf-8")
            except UnicodeDecodeError:
                raise forms.ValidationError("The file is not UTF-8 text.") from None
        if not (data.get("text") or "").strip():
            raise forms.ValidationError("Choose a YAML file or paste YAML.")
        try:
            data["documents"] = specs_from_yaml(data["text"])
        except SpecImportError as exc:
            raise forms.ValidationError(str(exc)) from None
        return data
