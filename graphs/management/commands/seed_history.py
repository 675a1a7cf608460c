"""`manage.py seed_history --runs N`: realistic run history for scale tests of the pages.

The history itself is made by `graphs.history.seed`; this command reads the options and
reports the progress. Run it on a database of its own (docs/history.md).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from graphs.history.seed import Seeded, seed_history


class Command(BaseCommand):
    help = "Generate realistic run history (runs and node executions) for scale tests."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--runs", type=int, required=True, help="How many runs to add.")
        parser.add_argument("--weeks", type=float, default=6.0, help="Spread over the past N.")
        parser.add_argument("--batch", type=int, default=5000, help="Runs per transaction.")
        parser.add_argument("--seed", type=int, default=1, help="Random seed (repeatable).")

    def handle(
        self, *args: Any, runs: int, weeks: float, batch: int, seed: int, **options: Any
    ) -> None:
        def progress(done: Seeded) -> None:
            self.stdout.write(
                f"{done.runs:,}/{runs:,} runs, {done.executions:,} node executions, "
                f"{done.seconds:.1f} s ({done.runs / done.seconds:,.0f} runs/s)"
            )

        total = seed_history(runs=runs, weeks=weeks, batch=batch, seed=seed, on_batch=progress)
        self.stdout.write(
            self.style.SUCCESS(
                f"Added {total.runs:,} runs and {total.executions:,} node executions in "
                f"{total.seconds:.1f} s."
            )
        )
