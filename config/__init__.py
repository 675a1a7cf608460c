"""Project configuration. The Celery app is loaded here so that `shared_task` binds to it in
every process (web, worker, beat, manage.py)."""

from config.celery import app as celery_app

__all__ = ("celery_app",)
