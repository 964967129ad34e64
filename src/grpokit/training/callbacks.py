"""The training run's own TrainerCallbacks (grpokit.training.grpo wires them): `RunLogger` (metrics.jsonl +
the metrics line), `CheckpointMarker` (COMPLETE once every rank wrote its part) and `GracefulStop`
(SIGINT/SIGTERM: finish the step, save, stop). They print to grpokit.console (the main process's only)."""
from __future__ import annotations

import json
import math
import resource
import signal
from pathlib import Path

import torch
from transformers import TrainerCallback

from grpokit.console import console
from grpokit.distributed import any_rank, barrier
from grpokit.run import MEMORY_KEYS, PROBE_ACCURACY, PROBE_ROWS, PROBE_SECONDS, RunDir, jsonable
from grpokit.run.writer import append_file
from grpokit.training.tracking import Progress


# ---------------------------------------------------------------- callbacks
class RunLogger(TrainerCallback):
    """metrics.jsonl and the metrics line of each logging step (through grpokit.training.tracking.Progress)."""

    def __init__(self, run_dir: Path, reward_names: list[str], progress: Progress):
        self.path = RunDir(run_dir).metrics
        self.reward_names = reward_names
        self.progress = progress
        self.t_last = progress.clock()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or "train_runtime" in logs or not state.is_world_process_zero:  # one writer over N processes
            return
        record = {"step": state.global_step, **{k: jsonable(v) for k, v in logs.items()}, **peak_memory()}
        with append_file(self.path) as f:  # never through a link (grpokit.run.writer)
            f.write(json.dumps(record) + "\n")
        now = self.progress.clock()
        probe = logs.get(PROBE_SECONDS) or 0.0  # the held-out probe's time is not the step's
        per_step = (now - self.t_last - probe) / max(1, args.logging_steps)
        self.t_last = now
        parts = [f"step {state.global_step}/{state.max_steps}"]
        if PROBE_ACCURACY in logs:
            parts.append(f"probe {100 * logs[PROBE_ACCURACY]:.1f}% of {logs.get(PROBE_ROWS)} held-out rows "
                         f"({probe:.0f}s)")
        if state.global_step == 0:  # the probe of the starting model: no step to time yet
            self.progress.print(" | ".join(parts))
            return
        if "reward" in logs:
            comps = ", ".join(f"{n} {_fmt(logs.get(f'rewards/{n}/mean'))}" for n in self.reward_names)
            parts.append(f"reward {_fmt(logs['reward'])} ({comps})")
        if "kl" in logs:
            parts.append(f"kl {_fmt(logs['kl'], 4)}")
        if "completions/mean_length" in logs:
            parts.append(f"len {logs['completions/mean_length']:.1f}")
        parts.append(f"{per_step:.1f}s/step")
        if not self.progress.live:  # a log file: the ETA rides on the line (a terminal shows it on the bar)
            parts.append(f"eta {self.progress.pace(state)[1]}")
        self.progress.print(" | ".join(parts))


class CheckpointMarker(TrainerCallback):
    """Mark a checkpoint complete once the Trainer has finished writing it."""

    def __init__(self, run: RunDir):
        self.run = run

    def on_save(self, args, state, control, **kwargs):
        barrier()  # every rank has written its part (rng state, ZeRO shards) before the marker says complete
        if state.is_world_process_zero:
            self.run.mark_complete(state.global_step)


class GracefulStop(TrainerCallback):
    """SIGINT/SIGTERM: finish the step, save, stop. A second SIGINT aborts."""

    def __init__(self):
        self.requested: str | None = None
        self._previous = {}

    def install(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.getsignal(sig)
            signal.signal(sig, self._handle)

    def uninstall(self):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _handle(self, signum, frame):
        if self.requested is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = signal.Signals(signum).name
        console.print(f"[yellow]{self.requested}: finishing this step, saving a checkpoint, then stopping "
                      "(Ctrl-C again to abort without saving)[/]")

    def on_step_end(self, args, state, control, **kwargs):
        # Over N processes every rank must stop (and save) at the same step, whichever got the signal first.
        if any_rank(self.requested is not None) and self.requested is None:
            self.requested = "signal on another rank"
        if self.requested:
            control.should_save = True
            control.should_training_stop = True


def _fmt(v, digits=3):
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}"


def peak_memory() -> dict:
    """Peak memory so far (GiB) for the report's memory plot: the GPU's when training on one, else the process's."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return {MEMORY_KEYS[0]: round(torch.cuda.max_memory_allocated() / 2**30, 3)}
    return {MEMORY_KEYS[1]: round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3)}  # ru_maxrss: KiB
