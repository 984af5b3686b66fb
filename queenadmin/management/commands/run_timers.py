"""``manage.py run_timers``: the timer loop alone, until SIGINT or SIGTERM."""

from __future__ import annotations

import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand

from queenadmin.domain.timers import FireStep, TimerLoop, wake


class Command(BaseCommand):
    help = "Fire due timers (any number of these may run beside serve; they share the work)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--verbose-steps", action="store_true", help="print a line per step that fired")

    def handle(self, *args: Any, **options: Any) -> None:
        stop = threading.Event()

        def on_signal(signum: int, frame: Any) -> None:
            stop.set()
            wake.wake_local()

        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)

        def report(step: FireStep) -> None:
            if options["verbose_steps"] and (step.fired or step.duplicates or step.backed_off or step.dead_lettered):
                self.stdout.write(
                    f"fired={step.fired} duplicates={step.duplicates} backed_off={step.backed_off} "
                    f"dead_lettered={step.dead_lettered}",
                )
                self.stdout.flush()

        loop = TimerLoop(on_step=report)
        self.stdout.write("timer loop running")
        self.stdout.flush()
        loop.run(stop)
        self.stdout.write(f"timer loop stopped (fired {loop.fired})")
