"""The Celery app: `celery -A config worker` executes queued runs, `celery -A config beat`
schedules the reaper (docs/operations.md). Settings are the Django settings named CELERY_*;
tasks are declared in the apps with `shared_task` (graphs/tasks.py)."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("switchyard")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
