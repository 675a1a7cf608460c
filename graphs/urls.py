"""The reviewer history pages (docs/history.md)."""

from django.urls import path

from graphs.pages import annotations, comparison, examples, steps, views

app_name = "graphs"

urlpatterns = [
    path("runs/", views.run_list, name="run_list"),
    path("runs/<int:run_id>/", views.run_detail, name="run_detail"),
    path("runs/<int:run_id>/cancel/", views.run_cancel, name="run_cancel"),
    path("runs/<int:run_id>/payloads/<str:part>.json", views.run_payload, name="run_payload"),
    path("runs/<int:run_id>/compare/", comparison.run_compare_pick, name="run_compare_pick"),
    path("runs/<int:run_id>/compare/<int:other_id>/", comparison.run_compare, name="run_compare"),
    path("runs/<int:run_id>/annotation/", annotations.run_annotate, name="run_annotate"),
    path("runs/<int:run_id>/steps/<int:index>/", steps.run_step, name="run_step"),
    path("runs/<int:run_id>/steps/<int:index>/rerun/", steps.run_rerun, name="run_rerun"),
    path("runs/<int:run_id>/breakpoint/", steps.run_breakpoint, name="run_breakpoint"),
    path("runs/<int:run_id>/example/", examples.run_example_keep, name="run_example_keep"),
    path(
        "runs/<int:run_id>/example/remove/",
        examples.run_example_remove,
        name="run_example_remove",
    ),
    path("workflows/", views.workflow_list, name="workflows"),
    path("approvals/", views.approvals, name="approvals"),
    path("approvals/<int:run_id>/decision/", views.approval_decide, name="approval_decide"),
]
