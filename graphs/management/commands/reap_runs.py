"""`python manage.py reap_runs`: fail the runs whose process died, once."""

from django.conf import settings
from django.core.management.base import BaseCommand

from graphs.reaper import runs_reap


class Command(BaseCommand):
    help = (
        "Mark failed, with the reason, every running run whose process has sent no heartbeat "
        "for GRAPHS_RUN_STALE_SECONDS; prints the runs reaped. `celery -A config beat` does "
        "this every GRAPHS_REAP_INTERVAL_SECONDS; use this command from cron without beat."
    )

    def handle(self, *args: object, **options: object) -> None:
        reaped = runs_reap()
        stale = settings.GRAPHS_RUN_STALE_SECONDS
        if not reaped:
            self.stdout.write(f"No run without a heartbeat for {stale:g} s.")
            return
        for run_id in reaped:
            self.stdout.write(f"run {run_id} failed: its process stopped")
        self.stdout.write(f"{len(reaped)} reaped.")
