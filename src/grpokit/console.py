"""The terminal grpokit's library code prints to: a rich Console that speaks on the main process only.

    from grpokit.console import console
    console.print("[yellow]note:[/] ...")

`Heartbeat` prints a plain status line at least every 30 s where no progress bar can be drawn (a log file,
CI, nohup). Light on purpose (rich and an environment variable, no torch): commands that load no model print
through it too (`grpokit compare`, `eval` tables). Errors are not printed here: they are raised, and every rank's
error reaches the CLI's stderr printer (grpokit.cli.output).
"""
from __future__ import annotations

import sys
import threading
import time

from rich.console import Console

from grpokit.distributed import is_rank_zero


class MainConsole(Console):
    """A rich Console that prints on the main process only (grpokit.distributed.is_rank_zero).

    With N processes every rank runs the same training code, so each status line (training ..., notes,
    completed at step ..., a signal's message) would otherwise appear N times. Errors are not printed here:
    they are raised, and every rank's error reaches the CLI's stderr printer (grpokit.cli.output), so a
    failure on any rank is still shown."""

    def print(self, *objects, **kwargs) -> None:
        if is_rank_zero():
            super().print(*objects, **kwargs)

    def log(self, *objects, **kwargs) -> None:
        if is_rank_zero():
            super().log(*objects, **kwargs)


console = MainConsole(highlight=False, soft_wrap=True)


def print_table(table, out: Console | None = None) -> None:
    """A rich table, whole. On a terminal rich fits it to the window; elsewhere (a pipe, a log file, CI) rich
    would fit it to 80 columns and cut headers and values (`accu…`, `100.…`), so it is printed at the width it
    needs. Every table grpokit prints goes through here (eval, compare, the demos)."""
    from rich.measure import Measurement

    out = out if out is not None else console
    if out.is_terminal:
        out.print(table)
        return
    need = Measurement.get(out, out.options.update_width(10_000), table).maximum
    width = out._width
    out.width = max(out.width, need)
    try:
        out.print(table)
    finally:
        out._width = width  # rich's own: None means "detect", as before


# ---------------------------------------------------------------- progress where no bar can be drawn
# Where output is not a terminal (a log file, CI, nohup) a rich bar draws nothing; a plain status line at least
# this often says the work is alive and how far it is (the audit, preflight and evaluation can each be silent
# for minutes: docs/measurements.md "Offline, the audit and progress").
PLAIN_STATUS_EVERY_S = 30.0


class Heartbeat:
    """A plain status line at least every `every` seconds while something runs, from a daemon thread.

        with Heartbeat(lambda: f"eval: {done}/{total} rows", print_line):
            ...                                   # long work; `touch()` when another line was just printed

    `status()` builds the line when it is due (rows or steps done, s/step, ETA: the caller knows them);
    `beat()` prints it if `every` seconds passed since the last line (tests drive it with a fake `clock`
    and `thread=False`). Lines go through `print_line` (default: stderr), so stdout stays the result.
    """

    def __init__(self, status, print_line=None, every: float | None = None, clock=None, thread: bool = True):
        self.status = status
        self.print_line = print_line or (lambda line: print(line, file=sys.stderr, flush=True))
        self.every = PLAIN_STATUS_EVERY_S if every is None else every  # read now: a test may shorten it
        self.clock = clock or time.monotonic
        self.last = self.clock()
        self._thread = thread
        self._stop = None
        self._worker = None

    def touch(self) -> None:
        """Another line just said where things are: the next status line is due `every` seconds from now."""
        self.last = self.clock()

    def beat(self) -> bool:
        """Print the status line if it is due; whether it printed."""
        if self.clock() - self.last < self.every:
            return False
        try:
            line = self.status()
        except Exception as e:  # noqa: BLE001 - a status line must never break the work it reports on
            line = f"(status unavailable: {type(e).__name__})"
        self.print_line(line)
        self.touch()
        return True

    def start(self) -> "Heartbeat":
        self.touch()
        if self._thread and self._worker is None:
            self._stop = threading.Event()
            poll = max(0.05, min(self.every / 4, 5.0))  # wake often enough to be late by at most a quarter period

            def run():
                while not self._stop.wait(poll):
                    self.beat()

            self._worker = threading.Thread(target=run, name="grpokit-heartbeat", daemon=True)
            self._worker.start()
        return self

    def stop(self) -> None:
        if self._worker is not None:
            self._stop.set()
            self._worker.join(timeout=1.0)
            self._worker = None

    def __enter__(self) -> "Heartbeat":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def hms(seconds: float) -> str:
    """Seconds as H:MM:SS (ETAs and elapsed times)."""
    seconds = int(round(max(0.0, seconds)))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
