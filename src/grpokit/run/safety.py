"""Crash safety of a training run: disk space before each save, and recording a failure.

    disk_problem(run, model, recipe.train)  # before the folder exists: can the disk hold the checkpoints kept?
    disk_space_guard(run, warn)            # a TrainerCallback: warn early, stop cleanly before a save that cannot fit
    fail_run(run, summary, exc, ...)       # run.json "failed", half-written checkpoints set aside, error + fix

Every failure while training ends in `fail_run`, so run.json never says
"running" for a process that is gone, and the user gets `error:` + `fix:`
(the traceback goes to run.json for a bug report, not to the terminal).

Not covered: Ctrl-C / SIGTERM (grpokit.training.callbacks.GracefulStop saves and stops cleanly); damaged
checkpoints (grpokit.run.checkpoints) and the writer lock (grpokit.run.locks).
"""
from __future__ import annotations

import errno
import os
import shutil
import traceback
from pathlib import Path
from typing import Callable

from grpokit.errors import GrpokitError, Problem, text_of
from grpokit.run.rundir import RunDir


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


# What torch's zip writer says when a write comes up short ("PytorchStreamWriter failed writing file ...: file
# write failed", "unexpected pos 1536 vs 1472"): the errno is lost in C++, so a full disk is told by its free space.
_SHORT_WRITE_WORDS = ("unexpected pos", "file write failed", "iostream error")
_NEARLY_FULL_BYTES = 64 << 20  # less than this free after a failed save: the disk filled up
# What a library that keeps no errno says of ENOSPC ("SafetensorError: ... I/O error: No space left on device (os
# error 28)"): the system's own words, so the disk is full whatever is free now.
_NO_SPACE_WORDS = (os.strerror(errno.ENOSPC), f"(os error {errno.ENOSPC})")


def is_disk_full(exc: BaseException, where: Path | None = None) -> bool:
    """ENOSPC (or EDQUOT) anywhere in the exception chain, or a short write of torch's (its C++ writer drops the
    errno) on a disk with almost nothing free at `where`."""
    seen, words = 0, False
    while exc is not None and seen < 10:
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        text = text_of(exc)  # an exception whose __str__ raises (an own reward's) is not a full disk
        if any(w in text for w in _NO_SPACE_WORDS):  # a library's own error naming ENOSPC (safetensors' Rust)
            return True
        words = words or any(w in text for w in _SHORT_WRITE_WORDS)
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    if words and where is not None:
        try:
            return shutil.disk_usage(where if where.exists() else where.parent).free < _NEARLY_FULL_BYTES
        except OSError:
            return False
    return False


def disk_full_problem(where: Path, need_bytes: int | None) -> Problem:
    free = shutil.disk_usage(where if where.exists() else where.parent).free
    need = f"free {max(need_bytes - free, need_bytes // 4) / 1e9:.1f} GB" if need_bytes else "free space"
    return Problem(str(where), f"no space left on device at {where} ({free / 1e9:.1f} GB free)",
                   f"{need} or move --output-dir to a larger disk")




# ---------------------------------------------------------------- disk space and failures
def expected_checkpoint_bytes(run: RunDir, model=None) -> int | None:
    """The size of the next checkpoint: the last one's, else weights + Adam's two moments of the trainable ones."""
    last = run.latest_checkpoint()
    if last is not None:
        return dir_bytes(last)
    if model is None:
        return None
    params = list(model.parameters())
    trainable = sum(p.numel() * p.element_size() for p in params if p.requires_grad)
    adapter = hasattr(model, "peft_config")  # a LoRA checkpoint holds the adapter only
    return (trainable if adapter else sum(p.numel() * p.element_size() for p in params)) + 2 * trainable


def checkpoints_at_peak(train) -> int | None:
    """How many checkpoints a run's folder holds at most: train.save_total_limit, plus the one a rotation writes
    before it deletes the oldest (transformers' Trainer saves, then rotates), else every save of max_steps and
    the final one; None when unknown (epochs without a limit)."""
    steps, every, limit = train.max_steps, max(1, train.save_steps), train.save_total_limit
    saves = None if steps <= 0 else steps // every + (1 if steps % every else 0)
    if limit:
        return min(limit + 1, saves) if saves is not None else limit + 1
    return saves


def disk_problem(run: RunDir, model, train) -> Problem | None:
    """Before a run's folder is created: the disk cannot hold the checkpoints the run will keep (each about
    `expected_checkpoint_bytes`, `checkpoints_at_peak` of them, less those already there); None when it can."""
    each = expected_checkpoint_bytes(run, model)
    peak = checkpoints_at_peak(train)
    if not each or not peak:
        return None
    already = len(run.complete_checkpoints()) if run.path.is_dir() else 0
    need, free = max(peak - already, 1) * each, run.free_bytes()
    if free >= need:
        return None
    limit = train.save_total_limit
    return Problem(str(run.path), f"{free / 1e9:.1f} GB free, but the run keeps up to {peak} checkpoint(s) of about "
                   f"{each / 1e9:.2f} GB each ({need / 1e9:.1f} GB): it would stop with a full disk",
                   f"free {(need - free) / 1e9:.1f} GB, lower train.save_total_limit (now {limit}), raise "
                   f"train.save_steps (now {train.save_steps}), or move --output-dir to a larger disk")


def disk_space_guard(run: RunDir, warn: Callable[[str], None]):
    """A TrainerCallback: warn at the start when the disk cannot hold two checkpoints; before each save, stop
    with ENOSPC (recorded as a failure, nothing half-written) when it cannot hold the next one."""
    from transformers import TrainerCallback

    class DiskSpaceGuard(TrainerCallback):
        need: int | None = None

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            self.need = expected_checkpoint_bytes(run, model)
            free = run.free_bytes()
            if self.need and free < 2 * self.need:
                warn(f"only {free / 1e9:.1f} GB free at {run.path}; each checkpoint takes about "
                     f"{self.need / 1e9:.1f} GB (free space, lower train.save_total_limit or move --output-dir)")

        def on_step_end(self, args, state, control, **kwargs):
            if not control.should_save:
                return
            self.need = expected_checkpoint_bytes(run) or self.need
            if self.need and run.free_bytes() < self.need:
                raise OSError(errno.ENOSPC, f"{run.checkpoint_path(state.global_step).name} needs about {self.need / 1e9:.2f} GB",
                              str(run.path))

    return DiskSpaceGuard()


_HINTS = (  # (text in the error message, what usually fixes it)
    ("probability tensor contains", "the policy produced NaN/inf: lower train.learning_rate or train.temperature"),
    ("out of memory", "lower train.per_device_train_batch_size, train.num_generations or train.max_completion_length"),
)


def fail_run(run: RunDir, summary: dict, exc: BaseException, step: int, need_bytes: int | None = None) -> GrpokitError:
    """Record a training failure in run.json (status failed, error, last complete checkpoint), set half-written
    checkpoints aside (RUN/set-aside/, named on stderr: never deleted on a guess), and return the error to show:
    what happened and how to continue."""
    extra = []
    try:
        set_aside = run.set_aside_incomplete()
    except (GrpokitError, OSError) as e:  # RUN/set-aside a file or a link: said, the failure still recorded
        set_aside = []
        extra = e.problems if isinstance(e, GrpokitError) else [Problem(str(run.path), f"set-aside: {e}")]
    last = run.latest_checkpoint()
    full = is_disk_full(exc, run.path)
    message = str(exc).strip() or repr(exc)
    summary.update(status="failed", step=step, last_checkpoint=str(last) if last else None,
                   error={"class": type(exc).__name__, "message": message[:2000],
                          "cause": "no space left on device" if full else None,
                          "traceback": "".join(traceback.format_exception(exc))[-8000:]},
                   set_aside=set_aside)
    recorded = _record(run, summary)
    resume = (f"continue from {last.name} with `grpokit train --resume {run.path}`" if last else
              f"no complete checkpoint was saved: `grpokit train --resume {run.path}` starts it again from step 0")
    said = "run.json records it as failed" if recorded else f"{run.run_json} could not be written"
    if full:
        problem = disk_full_problem(run.path, need_bytes)
        problem = Problem(problem.where, problem.message, f"{problem.fix}; then {resume}")
    elif isinstance(exc, GrpokitError):
        return GrpokitError([*exc.problems, *extra], exit_code=exc.exit_code, title=exc.title)
    else:
        hint = next((h for k, h in _HINTS if k in message.lower()), "the traceback is in run.json (error.traceback)")
        problem = Problem(type(exc).__name__, message.splitlines()[0][:300] if message else "", f"{hint}; then {resume}")
    return GrpokitError([problem, *extra], exit_code=1, title=f"training failed at step {step}; {said}")


def _record(run: RunDir, summary: dict) -> bool:
    """run.json says failed; on a disk too full for a new file, over the old one's own blocks. Whether it does."""
    try:
        run.write_status(summary)
        return True
    except OSError as e:
        if not is_disk_full(e):
            return False
    except GrpokitError:  # a link put at run.json's name: refused, never written through
        return False
    try:
        run.write_status({k: v for k, v in summary.items() if k not in ("notes", "rollbacks")} | {
            "error": {k: v for k, v in summary["error"].items() if k != "traceback"}}, in_place=True)
        return True
    except (OSError, GrpokitError):
        return False
