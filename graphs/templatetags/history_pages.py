"""Template helpers of the history pages (graphs/pages/display.py does the work).

A run's page shows up to 500 node executions, each with up to three JSON blocks. Rendered
with template tags and includes, 200 of them took 150 ms; even `format_html` costs 20 µs a
call. So a step's markup is one f-string here, with every value passed through `_e`
(the standard library's `html.escape`, quotes included) before it is marked safe.
"""

from __future__ import annotations

from collections.abc import Collection
from html import escape
from typing import Any

from django import template
from django.template import Context
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe

from graphs.history.selectors import approvals_nav
from graphs.pages import display
from graphs.pages.approval_forms import FormField
from graphs.pages.downloads import input_part

register = template.Library()


def _e(value: Any) -> str:
    return escape(str(value), quote=True)


@register.filter
def duration(milliseconds: float | None) -> str:
    return display.duration(milliseconds)


def _details(
    element_id: str, label: str, body: str, *, is_open: bool = False, flag: str = ""
) -> str:
    """A folded block; `body` is markup already escaped, the rest is escaped here."""
    flag_html = f'<span class="flag">{_e(flag)}</span>' if flag else ""
    return (
        f'<details class="payload{" truncated" if flag else ""}" id="{_e(element_id)}"'
        f"{' open' if is_open else ''}><summary>{_e(label)} {flag_html}</summary>"
        f"{body}</details>"
    )


def _payload(
    budget: display.PageBudget,
    value: Any,
    label: str,
    element_id: str,
    download: tuple[int, str],
    *,
    is_open: bool = False,
) -> str:
    shown = budget.show(value)
    flag = f"truncated: {shown.bytes} bytes, only the start was kept" if shown.truncated else ""
    body = f"<pre>{_e(shown.text)}</pre>"
    if shown.clipped:
        href = reverse("graphs:run_payload", args=download)
        body += (
            f'<p class="clipped">The first {len(shown.text):,} of {shown.chars:,} characters. '
            f'<a href="{_e(href)}" download>Download the whole JSON</a></p>'
        )
    return _details(element_id, label, body, is_open=is_open, flag=flag)


@register.simple_tag(takes_context=True)
def payload(
    context: Context, value: Any, label: str, element_id: str, part: str, is_open: bool = False
) -> SafeString:
    """A collapsible JSON block of the run's `part` (arguments, result); its id lets the
    page's refresh keep it open. A payload stored over the size cap says so and shows the
    start that was kept; one too deep or long for the page shows its start and a link to
    download it whole."""
    download = (context["run"].pk, part)
    budget = context["payload_budget"]
    return mark_safe(_payload(budget, value, label, element_id, download, is_open=is_open))


@register.simple_tag(takes_context=True)
def timeline_step(
    context: Context, row: display.TimelineRow, looping: Collection[str]
) -> SafeString:
    """One node execution: its head, its duration as a bar on the run's time axis, its
    error, and its input, what it evaluated and its output, folded (within the page's
    budget for payloads)."""
    budget = context["payload_budget"]
    execution = row.step.execution
    run_id = execution.run_id
    index = execution.index
    evaluated = row.evaluated
    running = execution.status == "running"
    # An approval node waiting for its decision has no output yet, and no end.
    waiting = execution.status == "waiting"
    if waiting:
        took = "waiting for a decision"
    else:
        took = "running" if running else _e(display.duration(execution.duration_ms))
    head = [
        f'<span class="index">{index}</span>',
        f'<strong class="node">{_e(execution.node_id)}</strong>',
    ]
    if execution.node_id in looping:
        head.append(f'<span class="iteration">iteration {execution.iteration}</span>')
    head.append(f'<span class="type">{_e(execution.node_type)}</span>')
    if evaluated.summary:
        head.append(f'<code class="summary">{_e(evaluated.summary)}</code>')
    status = _e(execution.status)
    head.append(f'<span class="badge {status}">{_e(execution.get_status_display())}</span>')
    if execution.attempts > 1:
        head.append(f'<span class="muted">{execution.attempts} attempts</span>')
    if execution.truncated:
        head.append('<span class="flag">truncated</span>')
    head.append(f'<a class="context-link" href="{_step_href(context, run_id, index)}">Context</a>')
    head.append(f'<span class="took">{took}</span>')

    blocks = [_payload(budget, row.step.input, "Input", f"in-{index}", (run_id, input_part(index)))]
    if evaluated.is_expression:
        body = f'<pre class="expr">{_e(evaluated.value)}</pre>'
        blocks.append(_details(f"eval-{index}", evaluated.label, body))
    elif evaluated.label:
        detail = (run_id, f"detail-{index}")
        blocks.append(_payload(budget, evaluated.value, evaluated.label, f"eval-{index}", detail))
    if not running and not waiting:
        output = (run_id, f"output-{index}")
        blocks.append(_payload(budget, execution.output, "Output", f"out-{index}", output))
    error = f'<pre class="step-error">{_e(execution.error)}</pre>' if execution.error else ""
    started = execution.started_at.strftime("%H:%M:%S.%f")
    return mark_safe(
        f'<li class="step status-{status}" id="step-{index}" '
        f'data-node-id="{_e(execution.node_id)}"><div class="step-head">{"".join(head)}</div>'
        f'<div class="bar-track" title="started {started}, took {took}"><div class="bar" '
        f'style="margin-left: {row.left:.3f}%; width: {row.width:.3f}%"></div></div>'
        f'{error}<div class="payloads">{"".join(blocks)}</div></li>'
    )


def _step_href(context: Context, run_id: int, index: int) -> str:
    """The URL of a step's page (graphs/pages/steps.py), reversed once per page: a reverse
    costs a hundred times a row's f-string."""
    base = context.render_context.get("step_href_base")
    if base is None:
        base = _e(reverse("graphs:run_step", args=[run_id, 0]).removesuffix("0/"))
        context.render_context["step_href_base"] = base
    return f"{base}{index}/"


@register.simple_tag(takes_context=True)
def approvals_waiting(context: Context) -> int | None:
    """How many runs wait for reviewers now, for the header's Approvals link; None for a
    user who may not decide them (no link)."""
    return approvals_nav(user=context["user"])


@register.simple_tag
def field_attrs(form_field: FormField) -> SafeString:
    """A form field's HTML attributes from its schema (type, bounds, required), escaped."""
    attrs = [f'{_e(name)}="{_e(value)}"' for name, value in form_field.attrs.items()]
    if form_field.required:
        attrs.append("required")
    return mark_safe(" ".join(attrs))
