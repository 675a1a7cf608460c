"""The history pages' query strings: the runs list's filters and page cursor, checked with
clear messages, and where a page of a run's node executions starts."""

from __future__ import annotations

from typing import Any

from django import forms
from django.http import QueryDict

from graphs.history.annotations import MAX_TAG_CHARS, AnnotationRefused, tag_checked
from graphs.history.selectors import Cursor, RunFilters
from graphs.models import Run, RunAnnotation

# The largest index a node execution can have (a positive integer column on every database).
MAX_INDEX = 2**31 - 1
CURSOR_ERROR = "This page link is out of date or mangled; start again from the newest runs."


class DateTimeInput(forms.DateTimeInput):
    input_type = "datetime-local"


class RunFilterForm(forms.Form):
    run = forms.IntegerField(label="Run id", required=False, min_value=1)
    workflow = forms.ChoiceField(required=False)
    status = forms.ChoiceField(required=False, choices=[("", "any status"), *Run.Status.choices])
    caller = forms.CharField(
        required=False, max_length=200, help_text="The exact caller, as shown in a run."
    )
    tests = forms.ChoiceField(
        label="Test runs",
        required=False,
        choices=[("", "with test runs"), ("hide", "without test runs"), ("only", "test runs only")],
    )
    verdict = forms.ChoiceField(
        required=False,
        choices=[("", "any verdict"), *RunAnnotation.Verdict.choices, ("none", "no verdict")],
    )
    tag = forms.CharField(
        required=False, max_length=MAX_TAG_CHARS, help_text="A tag a reviewer gave the runs."
    )
    since = forms.DateTimeField(label="From", required=False, widget=DateTimeInput)
    until = forms.DateTimeField(label="Until", required=False, widget=DateTimeInput)
    before = forms.CharField(required=False, widget=forms.HiddenInput)
    after = forms.CharField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args: Any, workflows: list[tuple[int, str]], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.workflow_ids = {name: pk for pk, name in workflows}
        workflow = self.fields["workflow"]
        assert isinstance(workflow, forms.ChoiceField)  # as declared above
        workflow.choices = [("", "any workflow"), *((name, name) for _, name in workflows)]

    def _cursor(self, name: str) -> Cursor | None:
        token = self.cleaned_data.get(name)
        if not token:
            return None
        try:
            return Cursor.parse(token)
        except (ValueError, OverflowError):
            raise forms.ValidationError(CURSOR_ERROR) from None

    def clean_tag(self) -> str:
        tag = self.cleaned_data.get("tag") or ""
        try:
            return tag_checked(tag) if tag else ""
        except AnnotationRefused as refused:
            raise forms.ValidationError(str(refused)) from None

    def clean_before(self) -> Cursor | None:
        return self._cursor("before")

    def clean_after(self) -> Cursor | None:
        return self._cursor("after")

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        since, until = cleaned.get("since"), cleaned.get("until")
        if since and until and since >= until:
            self.add_error("until", "Until must be after From; swap them or clear one.")
        return cleaned

    def filters(self) -> RunFilters:
        """The filters of a valid form."""
        data = self.cleaned_data
        return RunFilters(
            workflow_id=self.workflow_ids.get(data["workflow"]),
            status=data["status"],
            caller=data["caller"],
            since=data["since"],
            until=data["until"],
            run_id=data["run"],
            tests=data["tests"],
            verdict=data["verdict"],
            tag=data["tag"],
        )


def step_start(query: QueryDict) -> int:
    """The index of the first node execution to show (`?from=<index>`); 0 when absent or not
    a whole number, and never past what an index column holds."""
    try:
        return min(max(int(query.get("from", 0)), 0), MAX_INDEX)
    except ValueError:
        return 0
