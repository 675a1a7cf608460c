"""A reviewer's annotation of a run (graphs/history/annotations.py): written whole and read
back, every bad input refused with a clear message before anything changes; the run page's
review form (staff, CSRF) and the runs list filtered by verdict and tag, keyset pages and all."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from graphs.execution.control import RunNotFound
from graphs.history import selectors
from graphs.history.annotations import (
    AnnotationRefused,
    annotation_read,
    annotation_write,
    tags_split,
)
from graphs.models import Run, RunAnnotation, RunTag, Workflow

pytestmark = pytest.mark.usefixtures("loops")

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
RUNS = reverse("graphs:run_list")


def add_run(workflow: str = "classify", *, minutes: int = 0, **fields) -> Run:
    row = Workflow.objects.get(name=workflow)
    fields.setdefault("status", Run.Status.SUCCEEDED)
    return Run.objects.create(
        workflow=row,
        version=row.current_version,
        workflow_name=workflow,
        created_at=T0 + timedelta(minutes=minutes),
        **fields,
    )


@pytest.fixture
def reviewer(client, django_user_model) -> Client:
    user = django_user_model.objects.create_user("rita", password="x", is_staff=True)
    client.force_login(user)
    return client


def annotate_url(run: Run) -> str:
    return reverse("graphs:run_annotate", args=[run.pk])


def detail_url(run: Run) -> str:
    return reverse("graphs:run_detail", args=[run.pk])


def messages_of(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


# ---------------------------------------------------------------------------- the service


def test_an_annotation_is_written_whole_and_read_back():
    run = add_run()
    assert annotation_read(run_id=run.pk).updated_at is None  # nobody annotated it yet

    written = annotation_write(
        run_id=run.pk,
        verdict=" Bad ",
        note="  Took the medium branch for 3.\n",
        tags=["Wrong-Branch", "v1.2", "wrong-branch", "needs_review"],
        by="rita",
    )

    assert (written.verdict, written.note, written.by) == (
        "bad",
        "Took the medium branch for 3.",
        "rita",
    )
    assert written.tags == ["needs_review", "v1.2", "wrong-branch"]
    assert annotation_read(run_id=run.pk) == written

    again = annotation_write(run_id=run.pk, verdict="", note="", tags=["v1.2"], by="key:ab12")

    assert (again.verdict, again.note, again.tags, again.by) == ("", "", ["v1.2"], "key:ab12")
    assert list(RunTag.objects.filter(run=run).values_list("tag", flat=True)) == ["v1.2"]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"verdict": "great"},
            "Unknown verdict 'great': send good, bad, or an empty verdict for none.",
        ),
        (
            {"tags": [f"t{i}" for i in range(21)]},
            "Too many tags (21): a run takes at most 20; drop some.",
        ),
        (
            {"tags": ["ok", "no spaces"]},
            "Invalid tag 'no spaces': a tag is 1 to 40 letters (a-z), digits, '-', '_' or '.', "
            "e.g. wrong-branch or needs.review.",
        ),
        ({"tags": [""]}, "Invalid tag '': a tag is 1 to 40 letters"),
        ({"tags": ["x" * 41]}, "Invalid tag 'xxxxxxxxxx"),
        ({"tags": ["café"]}, "Invalid tag 'café'"),
        (
            {"note": "n" * 4001},
            "The note is 4001 characters long: at most 4000 are kept; shorten it.",
        ),
    ],
)
def test_bad_input_is_refused_saying_how_to_fix_it_and_changes_nothing(fields, message):
    run = add_run()
    annotation_write(run_id=run.pk, verdict="good", note="fine", tags=["kept"], by="rita")
    before = annotation_read(run_id=run.pk)

    with pytest.raises(AnnotationRefused) as refused:
        annotation_write(
            run_id=run.pk,
            **{"verdict": "bad", "note": "", "tags": [], "by": "mallory", **fields},
        )

    assert str(refused.value).startswith(message)
    assert annotation_read(run_id=run.pk) == before


def test_a_run_that_does_not_exist_is_refused():
    with pytest.raises(RunNotFound, match="No run 424242"):
        annotation_write(run_id=424242, verdict="good", note="", tags=[], by="rita")
    with pytest.raises(RunNotFound, match="No run 424242"):
        annotation_read(run_id=424242)
    assert not RunAnnotation.objects.exists()


def test_tags_typed_in_one_box_are_split_on_commas_and_spaces():
    assert tags_split(" slow, wrong-branch\tv2,,  ") == ["slow", "wrong-branch", "v2"]


# ---------------------------------------------------------------------------- the run page


def test_the_run_page_shows_the_review_and_a_form_to_change_it(reviewer):
    run = add_run()
    page = reviewer.get(detail_url(run)).content.decode()
    assert "Nobody has reviewed this run yet." in page
    assert f'action="{annotate_url(run)}"' in page

    response = reviewer.post(
        annotate_url(run),
        {"verdict": "bad", "note": "Chose medium for 3.", "tags": "Wrong-Branch, slow"},
        follow=True,
    )

    assert response.redirect_chain == [(detail_url(run), 302)]
    assert messages_of(response) == ["Review saved: bad, slow, wrong-branch."]
    page = response.content.decode()
    assert '<span class="verdict bad" id="run-verdict">bad</span>' in page
    assert f'<a class="tag" href="{RUNS}?tag=slow">slow</a>' in page
    assert '<p class="note" id="run-note">Chose medium for 3.</p>' in page
    assert "by rita," in page
    assert 'value="slow wrong-branch"' in page
    assert '<input type="radio" name="verdict" value="bad" checked>' in page
    annotation = RunAnnotation.objects.get(run=run)
    assert (annotation.verdict, annotation.by) == ("bad", "rita")


def test_a_bad_review_is_named_on_the_run_page_and_nothing_is_saved(reviewer):
    run = add_run()
    annotation_write(run_id=run.pk, verdict="good", note="", tags=["kept"], by="rita")

    response = reviewer.post(
        annotate_url(run), {"verdict": "bad", "tags": "ok no/slash"}, follow=True
    )

    assert response.status_code == 200
    assert messages_of(response) == [
        "Review not saved: Invalid tag 'no/slash': a tag is 1 to 40 letters (a-z), digits, "
        "'-', '_' or '.', e.g. wrong-branch or needs.review."
    ]
    assert annotation_read(run_id=run.pk).verdict == "good"
    assert annotation_read(run_id=run.pk).tags == ["kept"]
    huge = reviewer.post(annotate_url(run), {"tags": "a " * 500}, follow=True)
    assert messages_of(huge)[0].startswith("Review not saved: The tags box holds 1000 characters")


def test_the_review_form_needs_its_csrf_token_and_staff(django_user_model, outsider):
    run = add_run()
    staff = django_user_model.objects.create_user("rita", password="x", is_staff=True)
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(staff)
    assert strict.post(annotate_url(run), {"verdict": "good"}).status_code == 403
    other = Client()
    other.force_login(outsider)
    assert other.post(annotate_url(run), {"verdict": "good"}).status_code == 403
    assert Client().post(annotate_url(run), {"verdict": "good"}).status_code == 302
    assert not RunAnnotation.objects.exists()
    assert Client().get(annotate_url(run)).status_code == 405


def test_reviewing_a_run_that_does_not_exist_is_not_found(reviewer):
    assert reviewer.post("/runs/424242/annotation/", {"verdict": "good"}).status_code == 404


def test_a_run_in_progress_offers_no_form_its_reloads_would_wipe(reviewer):
    run = add_run(status=Run.Status.RUNNING)
    page = reviewer.get(detail_url(run)).content.decode()
    assert "It can be reviewed once it ends" in page
    assert f'action="{annotate_url(run)}"' not in page


def test_an_annotated_run_page_costs_one_query_more_for_its_tags(reviewer):
    plain, annotated = add_run(), add_run()
    annotation_write(run_id=annotated.pk, verdict="good", note="", tags=["a"], by="rita")

    # The annotation comes with the run: no query for a run without one.
    with CaptureQueriesContext(connection) as read_plain:
        reviewer.get(detail_url(plain))
    with CaptureQueriesContext(connection) as read_annotated:
        reviewer.get(detail_url(annotated))

    assert len(read_annotated) == len(read_plain) + 1
    assert any("graphs_runannotation" in query["sql"] for query in read_plain.captured_queries)


# ---------------------------------------------------------------------------- the runs list


@pytest.fixture
def judged() -> dict[str, Run]:
    """Runs a minute apart: good and tagged slow, bad and tagged slow, bad, not judged."""
    runs = {name: add_run(minutes=i) for i, name in enumerate(["good", "bad_slow", "bad", "none"])}
    annotation_write(run_id=runs["good"].pk, verdict="good", note="", tags=["slow"], by="r")
    annotation_write(run_id=runs["bad_slow"].pk, verdict="bad", note="", tags=["slow"], by="r")
    annotation_write(run_id=runs["bad"].pk, verdict="bad", note="", tags=["x"], by="r")
    return runs


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"verdict": "good"}, ["good"]),
        ({"verdict": "bad"}, ["bad", "bad_slow"]),
        ({"verdict": "none"}, ["none"]),
        ({"tag": "slow"}, ["bad_slow", "good"]),
        ({"tag": "SLOW"}, ["bad_slow", "good"]),
        ({"verdict": "bad", "tag": "slow"}, ["bad_slow"]),
        ({"tag": "nope"}, []),
    ],
)
def test_the_runs_list_filters_by_verdict_and_tag(reviewer, judged, query, expected):
    response = reviewer.get(RUNS, query)
    names = {run.pk: name for name, run in judged.items()}
    assert [names[run.pk] for run in response.context["page"].runs] == expected


def test_the_runs_list_shows_each_verdict_in_the_same_five_queries(
    reviewer, judged, django_assert_num_queries
):
    with django_assert_num_queries(5):
        response = reviewer.get(RUNS, {"tag": "slow"})
    page = response.content.decode()
    assert '<a class="verdict bad" href="?verdict=bad">bad</a>' in page
    assert '<a class="verdict good" href="?verdict=good">good</a>' in page
    assert '<option value="none">no verdict</option>' in page


def test_a_bad_tag_filter_is_named_in_the_form(reviewer, judged):
    response = reviewer.get(RUNS, {"tag": "no spaces"})
    assert response.context["page"] is None
    assert "Invalid tag &#x27;no spaces&#x27;" in response.content.decode()


def test_keyset_pages_keep_the_verdict_and_tag_filters(reviewer, judged, monkeypatch):
    # Pages of one run (the size is bound as run_list's default when it is defined).
    original = selectors.run_list
    monkeypatch.setattr(selectors, "run_list", lambda **filters: original(**filters, size=1))

    first = reviewer.get(RUNS, {"verdict": "bad", "tag": "slow"})
    assert [run.pk for run in first.context["page"].runs] == [judged["bad_slow"].pk]
    assert first.context["older_link"] == ""

    both = reviewer.get(RUNS, {"verdict": "bad"})
    older = both.context["older_link"]
    assert "verdict=bad" in older
    second = reviewer.get(RUNS + older)
    assert [run.pk for run in second.context["page"].runs] == [judged["bad_slow"].pk]
    tagged = reviewer.get(RUNS, {"tag": "slow"})
    assert "tag=slow" in tagged.context["older_link"]
