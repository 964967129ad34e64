"""Whether the installed TRL still has what grpokit relies on (grpokit.internals names it, in its table):
`problems()` compares every private method, its leading parameters and the batch keys with what grpokit expects and
says which one changed; `fused_head_problems()` the LM head's switch; `batch_problems` and `instance_problems` check
a real batch and a built trainer (tests/test_internals.py runs them all against the installed TRL).
`refuse_unusable()` runs the cheap part when a trainer is built (grpokit.training.trainer) and refuses a TRL
grpokit cannot use before any training starts.
"""
from __future__ import annotations

import importlib
import inspect
import re

from grpokit.errors import GrpokitError, Problem
from grpokit.internals import (
    ADVANTAGES,
    BATCH_KEYS,
    COMPLETION_ALIGNED,
    COMPLETION_IDS,
    COMPLETION_MASK,
    FUSED_HEAD_KERNEL,
    FUSED_HEAD_MODULE,
    FUSED_HEAD_SWITCH,
    LOG_KEYS,
    METHODS,
    MULTIMODAL_KEYS,
    PROMPT_IDS,
    PROMPT_MASK,
    TESTED_TRL,
)


def trl_version() -> str:
    import trl  # TRL loads with it: `grpokit --version` and recipe checks ask only for its version

    return trl.__version__


def _changed(internal: str, version: str, what: str) -> str:
    return (f"grpokit relies on GRPOTrainer.{internal}; TRL {version} changed it: {what} "
            f"(grpokit was checked against TRL {TESTED_TRL}: install trl=={TESTED_TRL} or update "
            "src/grpokit/internals.py)")


def problems(cls=None, version: str | None = None) -> list[str]:
    """What differs between `cls` (default: the installed GRPOTrainer) and what grpokit expects; [] if nothing."""
    if cls is None:
        from trl import GRPOTrainer as cls  # TRL loads with it, only when a check runs
    version = version or trl_version()
    out = []
    for name, lead in METHODS.items():
        method = getattr(cls, name, None)
        shown = f"{name}({', '.join(lead)})"
        if not callable(method):
            out.append(_changed(shown, version, "it no longer exists"))
            continue
        params = list(inspect.signature(method).parameters)[1:]  # without self
        if tuple(params[:len(lead)]) != lead:
            out.append(_changed(shown, version, f"its parameters are now ({', '.join(params)})"))
    generate = getattr(cls, "_generate_and_score_completions", None)
    if callable(generate):
        known = set(BATCH_KEYS) | set(COMPLETION_ALIGNED) | set(MULTIMODAL_KEYS)
        try:
            keys = set(re.findall(r'output\[\s*"(\w+)"\s*\]\s*=', inspect.getsource(generate)))
        except (OSError, TypeError):
            keys = set()
        new = sorted(keys - known)
        if new:
            out.append(_changed("_generate_and_score_completions(inputs)", version,
                                f"its batch has keys grpokit does not know how to filter: {', '.join(new)}"))
    return out


def fused_head_problems(version: str | None = None) -> list[str]:
    """The switch `internals.labelled_positions_only` rebinds: its name in trl.trainer.utils, and that
    add_fused_lm_head still decides `compact` with it."""
    version = version or trl_version()
    module = importlib.import_module(FUSED_HEAD_MODULE)
    what = f"{FUSED_HEAD_MODULE}.{FUSED_HEAD_SWITCH} (add_fused_lm_head's choice to score only labelled positions)"
    if not callable(getattr(module, FUSED_HEAD_SWITCH, None)):
        return [_changed(what, version, "it no longer exists")]
    try:
        source = inspect.getsource(module.add_fused_lm_head)
    except (OSError, TypeError, AttributeError):
        source = ""
    if f"compact = {FUSED_HEAD_SWITCH}(" not in source:
        return [_changed(what, version, "add_fused_lm_head no longer decides `compact` with it")]
    kernel = f"{FUSED_HEAD_MODULE}.{FUSED_HEAD_KERNEL} (the fused head's kernel, internals.fused_head_kernel)"
    if not hasattr(getattr(module, FUSED_HEAD_KERNEL, None), "apply"):
        return [_changed(kernel, version, "it no longer exists")]
    if f"{FUSED_HEAD_KERNEL}.apply(" not in source:
        return [_changed(kernel, version, "add_fused_lm_head no longer calls it by that name")]
    return []


def batch_problems(batch: dict, version: str | None = None) -> list[str]:
    """A real batch from `_generate_and_score_completions`: the keys and shapes `_compute_loss` is given."""
    version = version or trl_version()
    what = "_generate_and_score_completions(inputs) -> batch"
    missing = [k for k in BATCH_KEYS if k not in batch]
    if missing:
        return [_changed(what, version, f"the batch lacks {', '.join(missing)}")]
    rows, out = batch[PROMPT_IDS].shape[0], []
    for key in (PROMPT_IDS, PROMPT_MASK, COMPLETION_IDS, COMPLETION_MASK):
        if batch[key].dim() != 2 or batch[key].shape[0] != rows:
            out.append(_changed(what, version, f"batch[{key!r}] has shape {tuple(batch[key].shape)}, not (rows, len)"))
    if batch[PROMPT_IDS].shape != batch[PROMPT_MASK].shape or batch[COMPLETION_IDS].shape != batch[COMPLETION_MASK].shape:
        out.append(_changed(what, version, "ids and masks no longer have the same shape"))
    if batch[ADVANTAGES].shape[0] != rows or batch[ADVANTAGES].dim() > 2:
        out.append(_changed(what, version, f"batch['advantages'] has shape {tuple(batch[ADVANTAGES].shape)}"))
    return out


def instance_problems(trainer, version: str | None = None) -> list[str]:
    """The private dicts grpokit reads and writes on a built trainer."""
    version = version or trl_version()
    out = []
    metrics = getattr(trainer, "_metrics", None)
    if not isinstance(metrics, dict) or "train" not in metrics or not callable(getattr(metrics["train"], "__missing__",
                                                                                       None)):
        out.append(_changed("_metrics[mode][name]", version, "it is no longer a dict of defaultdict(list) per mode"))
    logs = getattr(trainer, "_logs", None)
    if not isinstance(logs, dict) or any(k not in logs for k in LOG_KEYS) or not isinstance(logs.get("rewards"), dict):
        out.append(_changed('_logs["prompt"|"completion"|"rewards"]', version,
                            f"it now holds {sorted(logs) if isinstance(logs, dict) else type(logs).__name__}"))
    return out


def refuse_unusable(cls) -> bool:
    """GrpokitError when `cls` (the installed GRPOTrainer) lacks what grpokit relies on, naming each change and the
    fix; else whether its fused LM head can score the labelled positions only (`fused_head_problems`: otherwise
    TRL's own behaviour, tests/test_internals.py names the change)."""
    found = problems(cls)
    if found:
        raise GrpokitError([Problem(f"trl {trl_version()}", p, f"pip install trl=={TESTED_TRL}") for p in found],
                           title="the installed TRL changed what grpokit builds on")
    return not fused_head_problems()
