"""Workflows (graphs served as MCP tools), their immutable versions, and the history of runs.

A `Workflow` is what authors edit; every change to it is frozen into a `WorkflowVersion`, and a
`Run` points at the version it ran, so history always shows the graph that actually ran. `Run` and
`NodeExecution` rows are written as the run goes, a batch at a time (graphs/execution/recorder.py),
so a crash leaves the history up to the last batch.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from nodespecs.models import Revision
from nodespecs.secrets import EncryptedJSONField


class WorkflowGroup(models.Model):
    """The `server` metadata of an imported graph file: the workflows it defined belong here.
    Each group is an MCP server of its own at `/mcp/<slug>` (docs/mcp.md)."""

    name = models.CharField(max_length=200, unique=True)
    # Chosen from the name when the group is created and kept after (graphs.authoring.services
    # `group_save`), so a renamed group's endpoint does not move under its clients.
    slug = models.SlugField(
        max_length=60,
        unique=True,
        editable=False,
        help_text="The group's MCP endpoint is /mcp/<slug>.",
    )
    version = models.CharField(max_length=50, default="1.0.0")
    title = models.CharField(max_length=200, blank=True)
    instructions = models.TextField(blank=True)
    # Who may change and publish the group's workflows through the API, besides keys with
    # workflows:admin (graphs/authoring/rights.py). A group without owners is the operators' alone.
    owners = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="workflow_groups",
        help_text="Users whose API keys may change and publish this group's workflows.",
    )
    owner_key = models.CharField(
        max_length=150,
        blank=True,
        editable=False,
        help_text="An API key without an owner that created the group (key:<prefix>) owns it.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.title or self.name


class Workflow(models.Model):
    """One MCP tool backed by a graph. Saved only through
    `graphs.authoring.services.workflow_save`."""

    group = models.ForeignKey(WorkflowGroup, on_delete=models.PROTECT, related_name="workflows")
    name = models.CharField(
        max_length=128, unique=True, help_text="The MCP tool name agents call, e.g. count_files."
    )
    description = models.TextField(blank=True)
    input_schema = models.JSONField(default=dict)
    output_schema = models.JSONField(null=True, blank=True)
    nodes = models.JSONField(default=list, help_text="The graph's nodes, as in the YAML format.")
    limits = models.JSONField(
        default=dict,
        blank=True,
        help_text="executionLimits: maxNodeExecutions, maxExecutionTimeMs (defaults apply).",
    )
    # The `mcpServers` names the nodes use, each bound to a registered provider's primary key.
    servers = models.JSONField(default=dict, blank=True)
    enabled = models.BooleanField(default=True)
    retry_on_worker_loss = models.BooleanField(
        "retry when its worker is lost",
        default=False,
        help_text=(
            "In queued mode, a run whose worker died mid-run is run again from the start (up "
            "to GRAPHS_RUN_RETRIES times) instead of being failed. Tick it only when repeating "
            "the nodes that already ran is harmless, e.g. they only read."
        ),
    )
    current_version = models.ForeignKey(
        "WorkflowVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return f"{reverse('graphs:workflows')}#workflow-{self.pk}"


class WorkflowVersion(Revision):
    """An immutable snapshot of a workflow, taken at each change; runs point here.

    A version is a draft until it is published (`published_at`); the workflow serves the one
    its `current_version` names. Saving in the admin or importing a file publishes at once;
    agents save drafts, test them and publish one (graphs/authoring/drafts.py)."""

    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        PUBLISHED = "published", "Published"
        # Was published, and another version is served now.
        RETIRED = "retired", "Retired"

    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="versions")
    # The tool in the YAML format's shape: name, description, inputSchema, outputSchema, nodes.
    definition = models.JSONField()
    limits = models.JSONField(default=dict)
    servers = models.JSONField(default=dict)
    digest = models.CharField(max_length=64)
    published_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["workflow", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["workflow", "number"], name="unique_workflow_version")
        ]

    def __str__(self) -> str:
        return f"{self.workflow.name} v{self.number}"

    @property
    def status(self) -> str:
        """Draft, published (served now) or retired."""
        if self.published_at is None:
            return self.Status.DRAFT
        if self.workflow.current_version_id == self.pk:
            return self.Status.PUBLISHED
        return self.Status.RETIRED


class Run(models.Model):
    """One call of a workflow: its arguments, outcome and timings."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        # At an approval node, holding nothing but its `Approval` row until it is decided.
        WAITING = "waiting", "Waiting for approval"
        # A test run stopped before a breakpoint, holding nothing but its `RunPause` row
        # until someone continues, steps or stops it (graphs/execution/resuming/breakpoints.py).
        PAUSED = "paused", "Paused at a breakpoint"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"
        TIMED_OUT = "timed_out", "Timed out"

    FINISHED = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED, Status.TIMED_OUT)
    ACTIVE = (Status.QUEUED, Status.RUNNING, Status.WAITING, Status.PAUSED)

    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="runs")
    version = models.ForeignKey(WorkflowVersion, on_delete=models.PROTECT, related_name="runs")
    # Denormalised so lists need no join and the label survives a rename.
    workflow_name = models.CharField(max_length=128)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    arguments = models.JSONField(default=dict)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    error_node_id = models.CharField(max_length=128, blank=True)
    caller = models.CharField(max_length=200, blank=True, help_text="API key or user.")
    session_id = models.CharField(max_length=200, blank=True)
    # The JSON-RPC id (as JSON) of the tools/call that started the run, so that the client's
    # notifications/cancelled can find it from any process.
    request_id = models.CharField(max_length=200, blank=True)
    # A test run (test_workflow): shown apart in the history, left out of the figures. Its
    # mocked mcp nodes' answers by node id (CallToolResult JSON), fixed when it is created.
    is_test = models.BooleanField(default=False)
    mocks = models.JSONField(null=True, blank=True)
    # Execution (graphs/execution/liveness.py): which process runs it, its last sign of life, and
    # why someone asked to stop it (non-empty: cancellation requested).
    worker = models.CharField(max_length=200, blank=True, help_text="host:pid running it.")
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    cancel_reason = models.CharField(max_length=500, blank=True)
    # Recovery by the reaper (graphs/execution/reaper.py). While a run is queued, `heartbeat_at` is
    # when it was last sent to the workers (null: when it was created).
    resends = models.PositiveSmallIntegerField(
        default=0, help_text="Times sent to the workers again because none had started it."
    )
    retries = models.PositiveSmallIntegerField(
        default=0, help_text="Times queued again because the worker running it was lost."
    )
    reaper_notes = models.TextField(blank=True, help_text="What the reaper did, a line each.")
    attempt_of = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="earlier_attempts",
        help_text="Set on an attempt whose worker was lost: the run that was queued again.",
    )
    # A re-run (graphs/execution/resuming/reruns.py): the run it replayed up to
    # `rerun_from["node"]`, and from where: {"node", "iteration", "index", "version":
    # "original" | "current", "input_edited"}. The original's page lists its re-runs.
    rerun_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="reruns"
    )
    rerun_from = models.JSONField(null=True, blank=True)
    # A test run's breakpoints (node ids): it pauses before each.
    breakpoints = models.JSONField(null=True, blank=True)
    node_count = models.PositiveIntegerField(default=0)
    truncated = models.BooleanField(default=False)
    # The OpenTelemetry trace the run belongs to (32 hex digits; graphs/execution/tracing.py), empty
    # when the server does not trace: the run page shows it and links to TRACE_URL_TEMPLATE.
    trace_id = models.CharField(max_length=32, blank=True)
    # The W3C `traceparent` of the span the run was started under (the request's), so that a
    # run the reaper sends again continues the same trace under it.
    trace_parent = models.CharField(max_length=55, blank=True)
    # The workflow runs whose calls led to this one, as `workflow/run` hops
    # (graphs/execution/lineage.py); empty for a call from outside. The run's own MCP calls carry it
    # on, with the run added.
    lineage = models.JSONField(default=list, blank=True)
    # Set by `graphs.execution.runs` from the same clock reading as `started_at` for a run that
    # starts at once: auto_now_add would read the clock again, after it, on saving.
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        # The history pages page by the cursor (created_at, id), newest first, alone or after
        # one filter: each index serves a page as a range scan however deep the cursor is.
        indexes = [
            models.Index(fields=["created_at", "id"], name="run_created_id"),
            models.Index(fields=["workflow", "created_at", "id"], name="run_workflow_created_id"),
            models.Index(fields=["status", "created_at", "id"], name="run_status_created_id"),
            models.Index(fields=["caller", "created_at", "id"], name="run_caller_created_id"),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} of {self.workflow_name} ({self.status})"

    def get_absolute_url(self) -> str:
        return reverse("graphs:run_detail", args=[self.pk])


class NodeExecution(models.Model):
    """One execution of one node in a run, in order; loops give a node several rows."""

    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        WAITING = "waiting", "Waiting"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="node_executions")
    index = models.PositiveIntegerField()
    node_id = models.CharField(max_length=128)
    node_type = models.CharField(max_length=16)
    iteration = models.PositiveIntegerField(default=1)
    status = models.CharField(max_length=16, choices=Status.choices)
    # A node's input is the previous execution's output (or the run's arguments): not stored.
    # What the node evaluated: an mcp node's call, a transform's expression, a switch's choice.
    detail = models.JSONField(null=True, blank=True)
    output = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=1)
    truncated = models.BooleanField(default=False)
    started_at = models.DateTimeField()
    duration_ms = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["run", "index"]
        constraints = [
            models.UniqueConstraint(fields=["run", "index"], name="unique_node_execution")
        ]
        # A run's path (graphs/history/selectors.py, `run_path`) is read as the first and last
        # execution of each node: a seek in this index each, whatever the run's length.
        indexes = [models.Index(fields=["run", "node_id", "index"], name="execution_run_node")]

    def __str__(self) -> str:
        return f"{self.node_id} #{self.iteration} in run {self.run_id}"


class Approval(models.Model):
    """A run waiting at an approval node, and the decision it got (graphs/execution/approvals/).

    While the run waits, this row is all it holds: `state` has what the engine needs to go on
    (every output so far and the arguments, unmasked, hence encrypted at rest), so any process
    resumes it. A decision is taken once: the process whose conditional update moves the run
    out of `waiting` wins, and records it here."""

    class Decision(models.TextChoices):
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"
        TIMEOUT = "timeout", "Timed out"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="approvals")
    # The approval node's execution: its position in the run and which iteration of it.
    index = models.PositiveIntegerField()
    node_id = models.CharField(max_length=128)
    iteration = models.PositiveIntegerField(default=1)
    approvers = models.CharField(max_length=16)
    message = models.TextField(blank=True)
    form = models.JSONField(null=True, blank=True, help_text="The form's JSON Schema.")
    created_at = models.DateTimeField(default=timezone.now)
    timeout_at = models.DateTimeField(null=True, blank=True)
    # Empty until decided.
    decision = models.CharField(max_length=16, choices=Decision.choices, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    # {"kind": "user" | "api_key" | "client", "id", "name"}; null for a timeout.
    decided_by = models.JSONField(null=True, blank=True)
    comment = models.TextField(blank=True)
    form_values = models.JSONField(null=True, blank=True)
    state = EncryptedJSONField(default=dict)

    class Meta:
        ordering = ["created_at", "id"]
        permissions = [("decide_approval", "Can approve or reject runs waiting for approval")]
        constraints = [models.UniqueConstraint(fields=["run", "index"], name="unique_approval")]
        indexes = [
            # The timer's one query: the earliest undecided timeout.
            models.Index(fields=["timeout_at"], condition=Q(decision=""), name="approval_due"),
        ]

    def __str__(self) -> str:
        return f"approval at {self.node_id} in run {self.run_id} ({self.decision or 'waiting'})"


class StoredBytes(models.Model):
    """The bytes of versions one API key stored on one day (UTC): what
    GRAPHS_STORED_BYTES_PER_KEY_PER_DAY bounds (graphs/authoring/version_storage.py). Pruning a
    version gives nothing back: the bound is on what a key writes."""

    actor = models.CharField(max_length=150, help_text="The key, as key:<prefix>.")
    day = models.DateField()
    bytes = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["actor", "day"], name="stored_bytes_day")]

    def __str__(self) -> str:
        return f"{self.actor} stored {self.bytes} bytes on {self.day}"


class RunPause(models.Model):
    """A test run paused before a breakpoint (graphs/execution/resuming/breakpoints.py).

    Like an `Approval`, this row is all the run holds while it is paused: `state` has what the
    engine needs to go on from the node (the arguments and every output so far, unmasked,
    hence encrypted at rest). The pause ends once: continued, stepped, stopped or expired."""

    class Ending(models.TextChoices):
        CONTINUED = "continued", "Continued"
        STEPPED = "stepped", "Stepped one node"
        STOPPED = "stopped", "Stopped"
        EXPIRED = "expired", "Expired"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="pauses")
    # The execution the run stopped before: its position in the run, and its node.
    index = models.PositiveIntegerField()
    node_id = models.CharField(max_length=128)
    iteration = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    # Empty while paused.
    ending = models.CharField(max_length=16, choices=Ending.choices, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    ended_by = models.CharField(max_length=200, blank=True)
    state = EncryptedJSONField(default=dict)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [models.UniqueConstraint(fields=["run", "index"], name="unique_run_pause")]
        indexes = [
            models.Index(fields=["expires_at"], condition=Q(ending=""), name="run_pause_due"),
        ]

    def __str__(self) -> str:
        return f"pause before {self.node_id} in run {self.run_id} ({self.ending or 'paused'})"


class RunAnnotation(models.Model):
    """A reviewer's judgement of a run: good or bad, and a note; its tags are `RunTag` rows
    (graphs/history/annotations.py)."""

    class Verdict(models.TextChoices):
        GOOD = "good", "Good"
        BAD = "bad", "Bad"

    run = models.OneToOneField(
        Run, on_delete=models.CASCADE, primary_key=True, related_name="annotation"
    )
    verdict = models.CharField(max_length=8, choices=Verdict.choices, blank=True)
    note = models.TextField(blank=True)
    # Who wrote it last: a username or key:<prefix>.
    by = models.CharField(max_length=200, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["verdict"], name="run_annotation_verdict")]

    def __str__(self) -> str:
        return f"run {self.run_id}: {self.verdict or 'no verdict'}"


class RunTag(models.Model):
    """One tag a reviewer gave a run: rows, not a list in the annotation, so that the runs
    list filters by a tag with an index on every database."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="tags")
    tag = models.CharField(max_length=40)

    class Meta:
        ordering = ["tag"]
        constraints = [models.UniqueConstraint(fields=["run", "tag"], name="unique_run_tag")]
        indexes = [models.Index(fields=["tag", "run"], name="run_tag_tag_run")]

    def __str__(self) -> str:
        return f"{self.tag} on run {self.run_id}"


class WorkflowExample(models.Model):
    """A finished run a reviewer kept as an example of its workflow (graphs/authoring/examples.py):
    what it was called with, what its mcp and approval nodes answered (the example's mocks, each
    node's answers in order) and the result every version must still give."""

    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="examples")
    # The run it was made from; the example keeps its own copies, so it outlives the run.
    run = models.OneToOneField(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="example"
    )
    arguments = models.JSONField(default=dict)
    # {node id: [output, ...]}: each mcp node's outputs in the order it produced them.
    calls = models.JSONField(default=dict)
    # {node id: [output, ...]}: each approval node's decisions, in order.
    decisions = models.JSONField(default=dict)
    result = models.JSONField(null=True)
    note = models.TextField(blank=True)
    created_by = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["workflow", "id"]

    def __str__(self) -> str:
        return f"example {self.pk} of {self.workflow_id} (run {self.run_id})"


class ExampleCheck(models.Model):
    """How one version did against one example when it was last checked."""

    example = models.ForeignKey(WorkflowExample, on_delete=models.CASCADE, related_name="checks")
    version = models.ForeignKey(
        WorkflowVersion, on_delete=models.CASCADE, related_name="example_checks"
    )
    passed = models.BooleanField()
    # What differs from the example's result (graphs/engine/json_diff.py: {"items", "cut"}).
    differences = models.JSONField(default=list)
    error = models.TextField(blank=True)
    checked_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["example", "version"], name="unique_example_check")
        ]

    def __str__(self) -> str:
        return f"example {self.example_id} on version {self.version_id}: {self.passed}"
