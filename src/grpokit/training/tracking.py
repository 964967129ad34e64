"""What a user watches while training runs: progress with ETA on the terminal, and experiment trackers.

`Progress` is a TrainerCallback: on an interactive terminal a rich bar (steps done/total, s/step, ETA) with
each logging step's metrics line printed above it; otherwise (a log file, CI, nohup) the metrics line
(grpokit.training.callbacks.RunLogger) ends with the ETA, and between two lines a plain status line comes at
least every 30 s (grpokit.console.Heartbeat: steps done, s/step, ETA, how long the current step has run), so a
step of minutes is not minutes of silence. The ETA is the mean step time since this (re)start times the steps
left.

Trackers are TRL/transformers' own callbacks, chosen by the recipe's `trl.report_to`; `route_trackers`
only moves TensorBoard's event files into the run directory. The run directory stays the record of truth.
"""
from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn
from rich.progress import Progress as Bar
from transformers import TrainerCallback
from transformers.integrations import TensorBoardCallback

from grpokit import hf_internals
from grpokit.console import Heartbeat, hms


class Progress(TrainerCallback):
    """Steps done/total, s/step and ETA; `print` puts a line above the bar (or plainly when there is none)."""

    def __init__(self, out: Console, status_every: float | None = None):
        self.console = out
        self.clock = time.monotonic
        self.t_start = self.clock()
        self.t_step = self.t_start  # when the step now running began
        self.step_start = 0
        self.bar = None
        self.state = None
        self.status_every = status_every  # None: grpokit.console.PLAIN_STATUS_EVERY_S, 30 s
        self.heartbeat: Heartbeat | None = None

    @property
    def live(self) -> bool:
        return self.bar is not None

    def on_train_begin(self, args, state, control, **kwargs):
        self.t_start = self.clock()
        self.step_start = state.global_step
        # One bar, on the main process (the others do not print metrics lines either).
        if self.console.is_terminal and self.bar is None and getattr(state, "is_world_process_zero", True):
            self.bar = Bar(TextColumn("training"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[pace]}"),
                           console=self.console)
            self.task = self.bar.add_task("train", total=state.max_steps, completed=state.global_step, pace="")
            self.bar.start()
        elif self.bar is None and self.heartbeat is None and getattr(state, "is_world_process_zero", True):
            self.state = state
            self.t_step = self.clock()
            self.heartbeat = Heartbeat(self.status_line, self.console.print, self.status_every, self.clock).start()

    def status_line(self) -> str:
        """The plain status line: steps done of total, s/step, ETA, and how long the running step has taken."""
        state = self.state
        done = state.global_step - self.step_start
        per_step = (self.t_step - self.t_start) / done if done > 0 else None  # finished steps only
        eta = hms(per_step * max(0, (state.max_steps or 0) - state.global_step)) if per_step else "-"
        pace = f"{per_step:.1f} s/step, eta {eta}" if per_step else "first step not done yet"
        return (f"training: step {state.global_step}/{state.max_steps}, {pace}; step {state.global_step + 1} "
                f"running for {hms(self.clock() - self.t_step)}")

    def on_step_end(self, args, state, control, **kwargs):
        self.t_step = self.clock()
        if self.bar is not None:
            per_step, eta = self.pace(state)
            self.bar.update(self.task, completed=state.global_step,
                            pace=f"{per_step:.1f}s/step | eta {eta}" if per_step else "")

    def on_train_end(self, args, state, control, **kwargs):
        self.close()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
        if self.heartbeat is not None:
            self.heartbeat.stop()
            self.heartbeat = None

    def pace(self, state) -> tuple[float | None, str]:
        """(mean seconds per step since this start, ETA as H:MM:SS)."""
        done = state.global_step - self.step_start
        if done <= 0:
            return None, "-"
        per_step = (self.clock() - self.t_start) / done
        left = max(0, (state.max_steps or 0) - state.global_step)
        return per_step, hms(per_step * left)

    def print(self, line: str) -> None:
        (self.bar.console if self.bar is not None else self.console).print(line)
        if self.heartbeat is not None:  # that line said where training is: the next status line is 30 s away
            self.heartbeat.touch()


def route_trackers(trainer, run_dir: Path) -> None:
    """TensorBoard event files go to RUN_DIR/tensorboard (transformers' default hides them under checkpoints/)."""
    for cb in hf_internals.trainer_callbacks(trainer):
        if isinstance(cb, TensorBoardCallback) and cb.logging_dir is None:
            cb.logging_dir = str(Path(run_dir) / "tensorboard")
