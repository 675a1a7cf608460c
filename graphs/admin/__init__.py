"""The graphs admin, registered here; each part lives in a module of its own:

- `graphs.admin.workflows`: workflows (edit the graph as YAML, see it drawn, test-run it),
  their read-only versions, and workflow groups; the editor's forms in `graphs.admin.forms`;
- `graphs.admin.runs`: runs and their node executions, read-only, a page of executions at a
  time (a run may have thousands);
- `graphs.admin.display`: how both show drawings and payloads.
"""

from __future__ import annotations

from django.contrib import admin
from django.urls import reverse_lazy

from graphs.admin.runs import RunAdmin
from graphs.admin.workflows import WorkflowAdmin, WorkflowGroupAdmin, WorkflowVersionAdmin
from graphs.models import Run, Workflow, WorkflowGroup, WorkflowVersion

# The admin's "View site" link leads reviewers to the history pages, which link back here.
# A lazy string (the URLconf is not loaded yet), which the stubs do not allow for.
admin.site.site_url = reverse_lazy("graphs:run_list")  # type: ignore[assignment]

admin.site.register(Workflow, WorkflowAdmin)
admin.site.register(WorkflowGroup, WorkflowGroupAdmin)
admin.site.register(WorkflowVersion, WorkflowVersionAdmin)
admin.site.register(Run, RunAdmin)
