"""The compare page: two runs of one workflow side by side (graphs/history/comparison.py does
the work), and the run page's "Compare with run #" box that leads to it. Staff only."""

from __future__ import annotations

import re

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from graphs.execution.control import RunNotFound
from graphs.history.comparison import MAX_EXECUTIONS, RunsNotComparable, runs_compare
from graphs.pages.views import staff_required

# A run id as typed: digits, as many as a 64-bit id has at most.
_RUN_ID = re.compile(r"[0-9]{1,18}")


@staff_required
def run_compare(request: HttpRequest, run_id: int, other_id: int) -> HttpResponse:
    """Run `run_id` (A) and run `other_id` (B) side by side: where their paths part, and
    what differs in their arguments, node outputs and result. A run that does not exist, or
    one of another workflow, gets the page saying so (404, 409)."""
    context = {"a_id": run_id, "b_id": other_id, "max_executions": MAX_EXECUTIONS, "nav": "runs"}
    try:
        comparison = runs_compare(run_id, other_id)
    except RunNotFound as exc:
        return render(request, "graphs/run_compare.html", {**context, "refused": exc}, status=404)
    except RunsNotComparable as exc:
        return render(request, "graphs/run_compare.html", {**context, "refused": exc}, status=409)
    return render(request, "graphs/run_compare.html", {**context, "comparison": comparison})


@staff_required
def run_compare_pick(request: HttpRequest, run_id: int) -> HttpResponse:
    """The run page's "Compare with run #" box (`?with=<id>`): on to the compare page, or back
    to the run page saying what to type instead."""
    typed = request.GET.get("with", "").strip().lstrip("#")
    if not _RUN_ID.fullmatch(typed) or int(typed) == 0:
        shown = repr(typed[:20]) if typed else "an empty box"
        messages.error(
            request,
            f"Compare with run #: {shown} is not a run id. Type the number of another run of "
            "this workflow, e.g. 42 (the Runs page lists them).",
        )
        return redirect("graphs:run_detail", run_id=run_id)
    return redirect("graphs:run_compare", run_id=run_id, other_id=int(typed))
