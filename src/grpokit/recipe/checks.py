"""Recipe checks that build what training will build, so `recipe check` fails where `train` would.

Each check returns `(location, what, fix)` triples (grpokit.recipe turns them into Problems with the
YAML line). What is built here, without loading any weights:
- every reward factory, called with its params (types checked against the factory's annotations first,
  so `markers: 5` is a type error and not a TypeError at step 1); own reward functions matched against
  their signature and called once on real rows (grpokit.recipe.own_reward_check);
- the training settings (the scheduler, the `trl:` pass-through, the GRPOConfig itself, online RFT's needs):
  grpokit.recipe.train_checks;
- the trackers named in report_to (installed?) and model.init_kwargs (bitsandbytes, flash-attn present?);
- the model source (grpokit.models.check_model_source: local folder loads; hub id looked up only online).
The data's own checks (paths, the rows as training reads them, hub datasets) are grpokit.recipe.data_checks.
Numbers must be finite everywhere: the schema refuses inf/nan in typed fields, `non_finite` walks the
free-form mappings (reward params, trl, init_kwargs).
"""
from __future__ import annotations

import dataclasses
import difflib
import importlib.util
import math
import typing
from typing import Any

from pydantic import TypeAdapter, ValidationError

from grpokit.errors import GrpokitError
from grpokit.rewards import OwnRewardError, available, build_own, get_spec, is_own, reward_label

Found = list[tuple[tuple, str, str]]

ATTENTION_PACKAGES = {"flash_attention_2": "is_flash_attn_2_available", "flash_attention_3": "is_flash_attn_3_available"}


def non_finite(value: Any, loc: tuple) -> Found:
    """inf/nan anywhere inside a free-form mapping (YAML `.inf` / `.nan`)."""
    if isinstance(value, float) and not math.isfinite(value):
        return [(loc, f"{value} is not a finite number", "give a finite number")]
    if isinstance(value, dict):
        return [f for k, v in value.items() for f in non_finite(v, (*loc, k))]
    if isinstance(value, list):
        return [f for i, v in enumerate(value) for f in non_finite(v, (*loc, i))]
    return []


def type_problem(annotation, value) -> str | None:
    try:
        TypeAdapter(annotation).validate_python(value, strict=True)
    except ValidationError as e:
        return e.errors()[0]["msg"]
    except Exception:  # noqa: BLE001 - an annotation pydantic cannot build a validator for: not checkable here
        return None
    return None


# ---------------------------------------------------------------- rewards
def check_rewards(rewards, base, data=None, notes: list[str] | None = None, rows=None) -> Found:
    """Every reward built as training builds it; own functions also matched against their signature and called
    once on a few real rows of `data` (the recipe's DataConfig) with TRL's keyword arguments, then, given `rows`
    (data.train's DataReport, read by check_data_rows), on every row within a time budget."""
    out: Found = []
    names = available()
    labels = [reward_label(r) for r in rewards]
    for i, r in enumerate(rewards):
        if (r.name is None) == (r.path is None) or (r.path is None) != (r.function is None):
            out.append((("rewards", i), "a reward is either `name` (built in, or module:function) or `path` + "
                        "`function`", "write {name: format} or {name: my_module:score} or "
                        "{path: rewards.py, function: score}"))
            continue
        if labels.index(labels[i]) != i:
            out.append((("rewards", i), f"two rewards are named {labels[i]!r} (logs and weights would mix them)",
                        "give each reward its own function name"))
        if r.path is not None or is_own(r.name):
            try:  # own reward functions: imported exactly as training will import them
                built = build_own(r, base, "")
            except OwnRewardError as e:
                out.append((("rewards", i, "path" if r.path else "name"), e.problem.message, e.problem.fix))
                continue
            from grpokit.recipe.own_reward_check import check_own_reward

            out += check_own_reward(built, r, ("rewards", i, "path" if r.path else "name"), data, base,
                                    notes if notes is not None else [], rows)
            continue
        if r.timeout_s is not None:
            out.append((("rewards", i, "timeout_s"), f"{r.name!r} is built in; timeout_s is for your own reward "
                        "functions", "remove it (a built-in reward that runs code takes its limit in params, e.g. "
                        "code_tests params.timeout_s)"))
        if r.role is not None:
            out.append((("rewards", i, "role"), f"{r.name!r} is built in; its role is "
                        f"{get_spec(r.name).role if r.name in names else 'declared by it'}",
                        "remove `role` (it is for your own reward functions)"))
        if r.name not in names:
            close = difflib.get_close_matches(r.name, names, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            out.append((("rewards", i, "name"), f"unknown reward {r.name!r}", f"{hint}valid rewards: {', '.join(names)}"))
            continue
        spec = get_spec(r.name)
        valid = ", ".join(sorted(spec.param_defaults())) or "(none)"
        unknown = spec.unknown_params(r.params)
        for p in unknown:
            out.append((("rewards", i, "params", p), f"reward {r.name!r} has no parameter {p!r}", f"valid parameters: {valid}"))
        hints = typing.get_type_hints(spec.factory)
        typed = [(p, type_problem(hints[p], v)) for p, v in r.params.items() if p in hints]
        for p, msg in typed:
            if msg:
                out.append((("rewards", i, "params", p), f"{msg} (got {r.params[p]!r})",
                            f"give a value of type {type_name(hints[p])}; see `grpokit rewards list`"))
        bad_values = non_finite(r.params, ("rewards", i, "params"))
        out += bad_values
        if unknown or any(m for _, m in typed) or bad_values:
            continue
        # Build the reward exactly as training will: the factory's own value checks run here.
        try:
            spec.factory(**r.params)
        except GrpokitError as e:
            out += [(("rewards", i, "name"), p.message, p.fix) for p in e.problems]
        except (ValueError, TypeError) as e:
            out.append((("rewards", i, "params"), f"reward {r.name!r} refuses its params: {e}",
                        f"fix the value; `grpokit rewards list` documents them (valid: {valid})"))
    if rewards and all(r.weight == 0 for r in rewards):
        out.append((("rewards",), "every reward weight is 0: nothing to learn from", "give at least one reward a non-zero weight"))
    return out


def type_name(annotation) -> str:
    return annotation.__name__ if isinstance(annotation, type) else str(annotation).replace("typing.", "")


# ---------------------------------------------------------------- model
def check_model(m, d) -> tuple[Found, list[str]]:
    from grpokit.models import check_model_source

    out: Found = []
    if m.enable_thinking is not None and d is not None and d.template != "chat":
        out.append((("model", "enable_thinking"), "enable_thinking only applies to the chat template",
                    "set data.template: chat, or remove model.enable_thinking"))
    out += check_init_kwargs(m)
    problems, notes = check_model_source(m.name)
    out += [(("model", "name"), what, fix) for what, fix in problems]
    if m.lora is not None and not problems:
        from grpokit.lora import lora_target_problem

        found = lora_target_problem(m.name, m.lora.target_modules)
        if found:
            out.append((("model", "lora", "target_modules"), *found))
    return out, notes


def check_init_kwargs(m) -> Found:
    kw = m.init_kwargs
    out = non_finite(kw, ("model", "init_kwargs"))
    for key in ("dtype", "torch_dtype"):
        if key in kw:
            out.append((("model", "init_kwargs", key), "the weights' dtype is model.dtype", "set model.dtype instead"))
    attn = kw.get("attn_implementation")
    if attn in ATTENTION_PACKAGES:
        import transformers.utils as tu

        if not getattr(tu, ATTENTION_PACKAGES[attn])():
            out.append((("model", "init_kwargs", "attn_implementation"), f"{attn} needs the flash-attn package, "
                        "which is not installed (or has no GPU here)", "pip install flash-attn on the GPU machine, "
                        "or use attn_implementation: sdpa"))
    q = kw.get("quantization_config")
    if q is not None:
        if not isinstance(q, dict):
            out.append((("model", "init_kwargs", "quantization_config"), "must be a mapping of BitsAndBytesConfig "
                        "fields", "e.g. {load_in_4bit: true, bnb_4bit_quant_type: nf4}"))
        elif importlib.util.find_spec("bitsandbytes") is None:
            out.append((("model", "init_kwargs", "quantization_config"), "4/8-bit loading needs bitsandbytes, which "
                        "is not installed", "pip install bitsandbytes (on a CUDA machine), or remove quantization_config"))
        else:
            from transformers import BitsAndBytesConfig

            try:
                BitsAndBytesConfig(**q)
            except (TypeError, ValueError) as e:
                out.append((("model", "init_kwargs", "quantization_config"), f"BitsAndBytesConfig refuses it: {e}",
                            "see transformers' BitsAndBytesConfig for the fields"))
        if m.lora is None:
            out.append((("model", "init_kwargs", "quantization_config"), "quantized weights cannot be trained "
                        "directly", "add model.lora (QLoRA trains a LoRA adapter on the quantized model)"))
    return out


# ---------------------------------------------------------------- generation
def check_continuous_config(g) -> Found:
    """generation.continuous_config: built into transformers' ContinuousBatchingConfig, as TRL will build it."""
    if g.backend != "continuous" or not g.continuous_config:
        return []
    from transformers.generation import ContinuousBatchingConfig

    fields = {f.name for f in dataclasses.fields(ContinuousBatchingConfig)}
    unknown = [k for k in g.continuous_config if k not in fields]
    if unknown:
        close = difflib.get_close_matches(unknown[0], sorted(fields), n=1)
        return [(("generation", "continuous_config", unknown[0]), f"ContinuousBatchingConfig has no field "
                 f"{unknown[0]!r}", f"did you mean '{close[0]}'?" if close else f"valid: {', '.join(sorted(fields))}")]
    try:
        ContinuousBatchingConfig(**g.continuous_config)
    except (TypeError, ValueError) as e:
        return [(("generation", "continuous_config"), f"ContinuousBatchingConfig refuses it: {e}",
                 "see transformers' ContinuousBatchingConfig for the fields")]
    return non_finite(g.continuous_config, ("generation", "continuous_config"))
