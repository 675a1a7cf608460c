"""Telling the operator's chat that a run waits for reviewers: APPROVAL_NOTIFY_URL.

A JSON POST, sent from a daemon thread so that the run's thread never waits on it: `text`
(what Slack's incoming webhooks show, with the link to the Approvals page), and the run, the
workflow, the node and the message for any other receiver. A failure is logged, never
retried: the Approvals page lists the run whatever happens here. The URL is the operator's
setting, not a caller's input.
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.request
from typing import Any

from django.conf import settings
from django.urls import reverse

from graphs.models import Approval

logger = logging.getLogger(__name__)

NOTIFY_TIMEOUT_SECONDS = 5


def notification(approval: Approval, workflow_name: str) -> dict[str, Any]:
    """The body posted for a run that starts waiting at `approval`."""
    link = settings.PUBLIC_URL + reverse("graphs:approvals")
    timeout = (
        f" It times out at {approval.timeout_at:%Y-%m-%d %H:%M} UTC." if approval.timeout_at else ""
    )
    return {
        "text": (
            f"Run {approval.run_id} of {workflow_name} waits for approval at node "
            f"{approval.node_id!r}: {approval.message}{timeout} Decide at {link}"
        ),
        "run_id": approval.run_id,
        "workflow": workflow_name,
        "node": approval.node_id,
        "message": approval.message,
        "timeout_at": approval.timeout_at.isoformat() if approval.timeout_at else None,
        "url": link,
    }


def notify_waiting(approval: Approval, workflow_name: str) -> None:
    """Post the notification in the background, when APPROVAL_NOTIFY_URL is set."""
    url = settings.APPROVAL_NOTIFY_URL
    if not url or approval.approvers != "reviewers":
        return
    body = json.dumps(notification(approval, workflow_name)).encode()
    threading.Thread(target=_post, args=(url, body), name="approval-notify", daemon=True).start()


def _post(url: str, body: bytes) -> None:
    request = urllib.request.Request(
        url, data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=NOTIFY_TIMEOUT_SECONDS) as response:
            response.read(1024)
    except Exception as exc:  # urllib's errors, a refused connection, a timeout
        logger.warning("APPROVAL_NOTIFY_URL could not be told of a waiting run: %s", exc)
