"""The run page's review form: a reviewer marks a run good or bad, with a note and tags
(graphs/history/annotations.py does the work). Staff only."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.http import require_POST

from graphs.execution.control import RunNotFound
from graphs.history.annotations import (
    MAX_TAG_CHARS,
    MAX_TAGS,
    AnnotationRefused,
    annotation_write,
    tags_split,
)
from graphs.pages.views import staff_required
from nodespecs.admin.audit import admin_user
from nodespecs.callers import actor_user

# The tags box holds at most MAX_TAGS tags and a separator after each (the page says so).
TAGS_BOX_CHARS = MAX_TAGS * (MAX_TAG_CHARS + 2)


@require_POST
@staff_required
@csrf_protect
def run_annotate(request: HttpRequest, run_id: int) -> HttpResponse:
    """Save the run's review (verdict, note, tags typed in one box), then back to the run
    page saying what was saved, or what was wrong (and that nothing was)."""
    tags = request.POST.get("tags", "")
    try:
        if len(tags) > TAGS_BOX_CHARS:
            raise AnnotationRefused(
                f"The tags box holds {len(tags)} characters: a run takes at most {MAX_TAGS} "
                f"tags of {MAX_TAG_CHARS} characters each; drop some."
            )
        annotation = annotation_write(
            run_id=run_id,
            verdict=request.POST.get("verdict", ""),
            note=request.POST.get("note", ""),
            tags=tags_split(tags),
            by=actor_user(admin_user(request)),
        )
    except RunNotFound:
        raise Http404(f"No run {run_id}; it may have been deleted.") from None
    except AnnotationRefused as refused:
        messages.error(request, f"Review not saved: {refused}")
    else:
        verdict = annotation.verdict or "no verdict"
        tagged = ", ".join(annotation.tags) or "no tags"
        messages.success(request, f"Review saved: {verdict}, {tagged}.")
    return redirect("graphs:run_detail", run_id=run_id)
