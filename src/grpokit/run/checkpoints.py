"""Checkpoints of a run: their names and whether their files are whole (the locks: grpokit.run.locks).

    step_of(path)                          # checkpoint-N -> N (the one place steps are parsed)
    checkpoint_damage(ck)                  # "config.json is missing", "model.safetensors is unreadable (...)"
    torch_state_damage(ck)                 # "optimizer.pt has no param_groups (list): ..." (resume, rollback)
    refuse_nonfinite(model, ck)            # NaN/inf weights -> GrpokitError

Damage checks read file headers only (safetensors, zip end records), never the weights.
"""
from __future__ import annotations

import re
import zipfile
from pathlib import Path

from grpokit.errors import GrpokitError, Problem
from grpokit.run.files import read_json

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
