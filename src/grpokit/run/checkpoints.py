"""Checkpoints of a run: their names, whether their files are whole, and the run's checkpoint folders (the locks:
grpokit.run.locks).

    step_of(path)                          # checkpoint-N -> N (the one place steps are parsed)
    checkpoint_damage(ck)                  # "config.json is missing", "model.safetensors is unreadable (...)"
    torch_state_damage(ck)                 # "optimizer.pt has no param_groups (list): ..." (resume, rollback)
    refuse_nonfinite(model, ck)            # NaN/inf weights -> GrpokitError
    RunCheckpoints                         # RunDir's checkpoints: listed, resumed from, set aside

Damage checks read file headers only (safetensors, zip end records), never the weights.
"""
from __future__ import annotations

import json
import re
import time
import zipfile
from pathlib import Path
from typing import Callable

from grpokit.errors import GrpokitError, Problem
from grpokit.run.files import note, read_json
from grpokit.run.files import note as files_note
from grpokit.run.layout import SET_ASIDE_DIR
from grpokit.run.writer import move, remove, write_file

CHECKPOINT_PREFIX, COMPLETE_MARKER = "checkpoint-", "COMPLETE"
_STEP = re.compile(rf"^{CHECKPOINT_PREFIX}(\d+)$")


def step_of(path: str | Path) -> int | None:
    """The step of a `checkpoint-N` folder; None for any other name (the one place steps are parsed)."""
    m = _STEP.match(Path(path).name)
    return int(m.group(1)) if m else None


# ---------------------------------------------------------------- damaged checkpoints
def checkpoint_damage(ck: Path, for_resume: bool = False) -> str | None:
    """What is wrong with a checkpoint's files (None: they look whole). Reads headers only, not the weights."""
    from safetensors import safe_open

    adapter = (ck / "adapter_config.json").is_file()
    if not adapter and not (ck / "config.json").is_file():
        return "config.json is missing"
    weights = sorted(ck.glob("*.safetensors"))
    if not weights and not list(ck.glob("*.bin")):
        return "no weights file (model.safetensors)"
    for f in weights:
        try:
            with safe_open(str(f), "np") as fh:  # checks the header and that the file covers every tensor
                fh.keys()
        except Exception as e:  # SafetensorError, OSError: the message says truncated / header corrupt
            return f"{f.name} is unreadable ({str(e).splitlines()[0][:120]})"
    if for_resume:
        state = read_json(ck / "trainer_state.json", note=lambda _: None)
        if state is None:
            return "trainer_state.json is missing or corrupt"
        why = _trainer_state_damage(state)
        if why:
            return why
        return torch_state_damage(ck)
    return None


def torch_state_damage(ck: Path) -> str | None:
    """Why the trainer could not restore a checkpoint's optimizer, scheduler or rng states (those present), or None:
    checked before a resume or a rollback starts, so that neither fails on them at its first step."""
    for f in sorted([*ck.glob("*.pt"), *ck.glob("*.pth")]):  # optimizer, scheduler, rng states: torch.save zips
        if not zipfile.is_zipfile(f):  # a cut or foreign one lacks the zip's end record
            return f"{f.name} is truncated or not a file torch wrote"
        why = _torch_state_damage(f)
        if why:
            return why
    return None


def _torch_state_damage(f: Path) -> str | None:
    """Why the Trainer could not restore `f` (optimizer.pt, scheduler.pt, rng_state*.pth): not loadable as plain
    tensors and containers (an empty zip, a pickled object), or another state than its name says; None. Loaded as
    transformers loads it (weights_only, numpy's rng types allowed), its tensors mapped, not read."""
    import torch
    from transformers.trainer_pt_utils import safe_globals

    try:
        with safe_globals():
            state = torch.load(f, map_location="cpu", weights_only=True, mmap=True)
    except Exception as e:  # noqa: BLE001 - whatever torch says of a foreign file, the verdict is the same
        # torch's text for a refused object suggests turning the safety check off: never repeated to a user
        return f"{f.name} is not a state torch saved for this trainer (it does not load as plain tensors: " \
               f"{type(e).__name__})"
    need = ({"param_groups": list, "state": dict} if f.name == "optimizer.pt" else
            {"last_epoch": int} if f.name == "scheduler.pt" else
            {"python": tuple, "cpu": torch.Tensor} if f.name.startswith("rng_state") else {})
    if need and not isinstance(state, dict):
        return f"{f.name} holds a {type(state).__name__}, not the {f.stem} state the trainer saves"
    for key, kind in need.items():
        if not isinstance(state.get(key), kind):
            return f"{f.name} has no {key} ({kind.__name__}): not the {f.stem} state the trainer saves"
    return None


# What transformers' resume reads from trainer_state.json without a default: the step, and the batch size that
# compare_trainer_and_checkpoint_args divides (missing, it raised a TypeError on every --resume, for ever).
_STATE_FIELDS = {"global_step": int, "train_batch_size": int}
_STATE_TYPES = {"max_steps": int, "log_history": list, "epoch": (int, float)}  # when present: of this type


def _trainer_state_damage(state: dict) -> str | None:
    """Why transformers could not resume from this trainer_state.json (a field it needs missing or of another
    type, a key TrainerState does not take), or None."""
    for key, kind in _STATE_FIELDS.items():
        if type(state.get(key)) is not kind:
            return f"trainer_state.json has no {kind.__name__} {key} (not a state transformers wrote)"
    for key, kind in _STATE_TYPES.items():
        if state.get(key) is not None and not isinstance(state[key], kind):
            return f"trainer_state.json's {key} is not a {getattr(kind, '__name__', 'number')}"
    from dataclasses import fields

    from transformers import TrainerState

    unknown = sorted(set(state) - {f.name for f in fields(TrainerState)})
    if unknown:
        return f"trainer_state.json holds keys transformers does not read ({', '.join(unknown[:3])})"
    callbacks = state.get("stateful_callbacks")  # {name: {"args", "attributes"} or a list of them}, read on resume
    if callbacks is not None and not (isinstance(callbacks, dict) and all(
            all(isinstance(s, dict) and isinstance(s.get("args", {}), dict) and isinstance(s.get("attributes", {}), dict)
                for s in (v if isinstance(v, list) else [v])) for v in callbacks.values())):
        return "trainer_state.json's stateful_callbacks is not the callbacks' states transformers wrote"
    return None


def nonfinite_weights(model) -> list[str]:
    """Names of parameters holding NaN or inf (a diverged run saves them without complaint)."""
    import torch

    return [n for n, p in model.named_parameters() if not torch.isfinite(p.detach()).all()]


def refuse_nonfinite(model, ck: Path | str) -> None:
    bad = nonfinite_weights(model)
    if bad:
        raise GrpokitError([Problem(str(ck), f"checkpoint is damaged: {len(bad)} weight tensor(s) hold NaN or inf "
                                    f"({', '.join(bad[:3])}{', ...' if len(bad) > 3 else ''})",
                                    "training diverged before this save: use an earlier checkpoint "
                                    "(`grpokit doctor RUN_DIR` shows where), or lower train.learning_rate")])


def damaged(ck: Path, why: str) -> GrpokitError:
    return GrpokitError([Problem(str(ck), f"checkpoint {step_of(ck)} is damaged: {why}",
                                 "use another checkpoint (last, best or a step), or delete this folder")])


class RunCheckpoints:
    """A run's checkpoint folders: listed, resumed from, set aside, resolved from a spec. The part of
    grpokit.run.rundir.RunDir that reads and moves checkpoints/ (it needs RunDir's `path`, `checkpoints_dir`,
    `read_status` and `read_best`)."""

    def checkpoint_path(self, step: int) -> Path:
        return self.checkpoints_dir / f"{CHECKPOINT_PREFIX}{step}"

    def _all_checkpoints(self) -> list[Path]:
        if not self.checkpoints_dir.is_dir():
            return []
        return sorted((p for p in self.checkpoints_dir.iterdir() if step_of(p) is not None and p.is_dir()), key=step_of)

    def complete_checkpoints(self) -> list[Path]:
        """Checkpoints fully written (COMPLETE marker present), oldest first."""
        return [p for p in self._all_checkpoints() if (p / COMPLETE_MARKER).is_file()]

    def by_step(self) -> dict[int, Path]:
        return {step_of(p): p for p in self.complete_checkpoints()}

    def latest_checkpoint(self) -> Path | None:
        done = self.complete_checkpoints()
        return done[-1] if done else None

    def checkpoint_progress(self, ck: Path | None = ...) -> tuple[int, int | None]:
        """(global step of a checkpoint (default: the newest complete one), 0 without one; the max_steps its
        trainer was set to)."""
        ck = self.latest_checkpoint() if ck is ... else ck
        if ck is None:
            return 0, None
        state = read_json(ck / "trainer_state.json", note=lambda _: None) or {}
        step, target = state.get("global_step"), state.get("max_steps")
        step = step if type(step) is int else step_of(ck)
        return step, target if type(target) is int and target > 0 else None

    def mark_complete(self, step: int) -> None:
        ck = self.checkpoint_path(step)
        if ck.is_dir():
            write_file(ck / COMPLETE_MARKER, json.dumps({"step": step, "time": time.time()}), within=self.path)

    def _contradiction(self, ck: Path) -> None:
        """Stop when a checkpoint's trainer_state.json names another step than its folder: resuming from it would
        train from that step (-5: steps -4, -3, ... written as checkpoint--4)."""
        state = read_json(ck / "trainer_state.json", note=lambda _: None)
        step = state.get("global_step") if state else None
        if type(step) is not int or step == step_of(ck):  # none at all: damage, passed over (checkpoint_damage)
            return
        recorded = self.read_status().get("step")
        record = f"; run.json records step {recorded}" if type(recorded) is int else ""
        raise GrpokitError([Problem(str(ck / "trainer_state.json"), f"global_step is {str(step)[:40]}, but the folder "
                                    f"is {ck.name} (step {step_of(ck)}){record}: resuming would train from the wrong "
                                    "step, so nothing was resumed",
                                    f"restore this checkpoint's trainer_state.json (its global_step is {step_of(ck)}), "
                                    f"or move {ck.name} out of {self.checkpoints_dir} to resume from the one before")],
                           title="a checkpoint contradicts its own name")

    def resume_checkpoint(self, note: Callable[[str], None] = note) -> Path | None:
        """The newest checkpoint a resume can start from: complete and whole. Damaged newer ones are passed over
        with a note (a resume sets them aside). One without its COMPLETE marker whose files are whole and whose
        trainer_state.json names its own step cannot be proven incomplete: it is kept, its marker written again
        (always said, on stderr: a change on disk). A trainer state naming another step stops the resume."""
        for ck in reversed(self._all_checkpoints()):
            self._contradiction(ck)
            why = checkpoint_damage(ck, for_resume=True)
            marked = (ck / COMPLETE_MARKER).is_file()
            if why is None:
                if not marked:
                    self.mark_complete(step_of(ck))
                    files_note(f"{ck}: no {COMPLETE_MARKER} marker, but its files are whole and its trainer state is "
                               f"at step {step_of(ck)}: kept, and marked complete again")
                return ck
            if marked:
                note(f"{ck.name} is damaged ({why}); falling back to the previous complete checkpoint")
            else:
                note(f"{ck.name} is incomplete (no {COMPLETE_MARKER} marker; {why}); falling back to the one before")
        return None

    def set_aside(self, ck: Path, why: str, note: Callable[[str], None] = note) -> Path:
        """Move a checkpoint out of checkpoints/ into set-aside/<name>-<UTC time> (never deleted); where it went."""
        base = self.path / SET_ASIDE_DIR / f"{ck.name}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"
        dest, n = base, 1
        while dest.exists():
            dest, n = base.with_name(f"{base.name}-{n}"), n + 1
        move(ck, dest, within=self.path)
        note(f"set aside {ck} ({why}) -> {dest}: delete it yourself once you no longer need it")
        return dest

    def set_aside_incomplete(self, note: Callable[[str], None] = note) -> list[str]:
        """Set aside the checkpoint folders proven incomplete (no COMPLETE marker, and a file missing, cut or
        unreadable); one whose files look whole is kept. The names set aside."""
        gone = []
        for p in self._all_checkpoints():
            if (p / COMPLETE_MARKER).is_file():
                continue
            why = checkpoint_damage(p, for_resume=True)
            if why is not None:
                self.set_aside(p, f"incomplete: no {COMPLETE_MARKER} marker, {why}", note)
                gone.append(p.name)
        return gone

    def set_aside_after(self, step: int, note: Callable[[str], None] = note) -> list[str]:
        """Set aside the checkpoints after `step` (a resume redoes those steps; they were passed over as damaged)."""
        later = [p for p in self._all_checkpoints() if step_of(p) > step]
        for p in later:
            self.set_aside(p, f"after {CHECKPOINT_PREFIX}{step}, where this resume starts", note)
        return [p.name for p in later]

    def remove_after(self, step: int) -> None:
        """Delete the checkpoints after `step`: a health rollback's decision (grpokit.training.rollback), on the
        evidence of its finding, not a guess."""
        for p in self._all_checkpoints():
            if step_of(p) > step:
                remove(p)

    def checked(self, ck: Path | None) -> Path | None:
        """`ck` if its files look whole, else a GrpokitError naming what is damaged (None passes: the base model)."""
        if ck is not None:
            why = checkpoint_damage(ck)
            if why:
                raise damaged(ck, why)
        return ck
