"""`python manage.py reap_runs`: settle the runs no process is going to finish, once."""

from django.conf import settings
from django.core.management.base import BaseCommand

from graphs.execution.reaper import runs_reap


class Command(BaseCommand):
    help = (
        "Fail (or retry, when its workflow allows) every running run whose process has sent no "
        "heartbeat for GRAPHS_RUN_STALE_SECONDS, and send again (or fail) every queued run no "
        "worker started within GRAPHS_QUEUED_STALE_SECONDS; prints what was done. `celery -A "
        "config beat` does this every GRAPHS_REAP_INTERVAL_SECONDS; use this command from cron "
        "without beat."
    )

    def handle(self, *args: object, **options: object) -> None:
        reaped = runs_reap()
        if not reaped:
            self.stdout.write(
                f"Nothing to reap: no run without a heartbeat for "
                f"{settings.GRAPHS_RUN_STALE_SECONDS:g} s, none queued and not started for "
                f"{settings.GRAPHS_QUEUED_STALE_SECONDS:g} s."
            )
            return
        for done in reaped:
            self.stdout.write(f"run {done.run_id} {done.outcome}")
        self.stdout.write(f"{len(reaped)} reaped.")
