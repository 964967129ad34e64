"""Recipe checks of the training settings, built as training builds them, so `recipe check` fails where `train` would.

- the batch geometry TRL would reject, and what online RFT (train.algorithm: rft) needs;
- the learning-rate scheduler, on a one-tensor optimizer (an unknown name or missing scheduler kwargs);
- the GRPOConfig itself, through `grpokit.recipe.grpo_args` (the function training uses), with the `trl:`
  pass-through merged in: unknown fields, fields the recipe already models, wrongly typed values, bounds
  GRPOConfig does not check, the trackers named in report_to.
Each check returns `(location, what, fix)` triples, as grpokit.recipe.checks' do.
"""
from __future__ import annotations

import dataclasses
import difflib
import tempfile
import typing
from pathlib import Path
from typing import Any

from grpokit import hf_internals
from grpokit.generation.backends import BACKENDS
from grpokit.recipe.checks import Found, non_finite, type_name, type_problem

# GRPOConfig fields grpokit sets itself, and where a recipe sets them instead: in `trl:` they are a clash.
GRPOKIT_SETS = {
    "output_dir": "output_dir (or --output-dir)",
    "reward_weights": "rewards[].weight",
    "chat_template_kwargs": "model.enable_thinking",
    "gradient_checkpointing": "model.gradient_checkpointing",
    "activation_checkpointing": "model.gradient_checkpointing",
    "model_init_kwargs": "model.init_kwargs",
    "warmup_steps": "train.warmup_ratio",
    "save_strategy": "train.save_steps (grpokit saves every save_steps)",
    "disable_tqdm": "grpokit's own progress line (train.logging_steps)",
    "remove_unused_columns": "nothing: grpokit's rewards read the dataset columns, so they must stay",
}
# Bounds GRPOConfig does not check itself (a bad value fails at step 1 or silently changes the loss); a bound in
# ABOVE excludes its low end.
TRL_BOUNDS = {
    "epsilon_high": (0, None), "top_entropy_quantile": (0, 1), "num_iterations": (1, None),
    "generation_batch_size": (1, None), "steps_per_generation": (1, None), "delta": (0, None),
    "num_completions_to_print": (0, None), "repetition_penalty": (0, None), "top_k": (0, None), "min_p": (0, 1),
}
# The sampling settings of trl.generation_kwargs, bounded as transformers' processors bound them (an int where a
# float is meant is read as a float: grpokit.recipe.trl_args.floats_where_meant).
GENERATION_BOUNDS = {"temperature": (0, None), "top_p": (0, 1), "min_p": (0, 1), "typical_p": (0, 1),
                     "repetition_penalty": (0, None), "top_k": (0, None)}
ABOVE = frozenset({"repetition_penalty", "temperature", "top_p", "typical_p"})  # 0 is refused by transformers
# Lengths of a completion in trl.generation_kwargs: train.max_completion_length owns it (its bound, the memory plan,
# the truncation finding); a max_new_tokens of 99999999 here passed, then step 1 generated for ever.
GENERATION_LENGTHS = ("max_new_tokens", "max_length")

# ---------------------------------------------------------------- train, scheduler
def check_train(t, trl: dict) -> Found:
    from grpokit.recipe.trl_args import batch_geometry

    out: Found = []
    g = batch_geometry(t, trl)  # trl: generation_batch_size / steps_per_generation are GRPOConfig's to check
    if g.per_process % g.group and g.from_trl is None:
        out.append((
            ("train", "num_generations"),
            f"the generation batch (per_device_train_batch_size {t.per_device_train_batch_size} x "
            f"gradient_accumulation_steps {t.gradient_accumulation_steps} = {g.per_process}) is not divisible by "
            f"num_generations {t.num_generations}; TRL would reject it",
            f"make per_device_train_batch_size x gradient_accumulation_steps a multiple of {t.num_generations}",
        ))
    return out + check_scheduler(t, trl.get("lr_scheduler_kwargs"))


def check_algorithm(t, rewards, env) -> Found:
    """What online RFT (train.algorithm: rft, grpokit.training.online_rft) needs: a correctness reward to keep the right
    completions by, the SFT loss's temperature 1.0 (TRL fixes the loss's temperature when the trainer is built), no
    tool episodes, no KL term."""
    from grpokit.task import reward_role

    if t.algorithm != "rft":
        return []
    out: Found = []
    if rewards is not None and not any(reward_role(r) == "correctness" for r in rewards):
        out.append((("train", "algorithm"), "online RFT keeps the completions the correctness reward gives full marks; "
                    "this recipe has no correctness reward",
                    "add a correctness reward (grpokit rewards list), or use train.algorithm: grpo"))
    if t.temperature != 1.0:
        out.append((("train", "temperature"), f"online RFT trains the SFT loss, at temperature 1.0; TRL computes the "
                    f"loss's log-probs at train.temperature ({t.temperature:g})",
                    "set train.temperature: 1.0 (top_p still shapes the samples)"))
    if t.beta:
        out.append((("train", "beta"), "online RFT has no KL term", "set train.beta: 0"))
    if env:
        out.append((("train", "algorithm"), "online RFT of tool episodes is not supported",
                    "use train.algorithm: grpo with an env"))
    return out


def check_scheduler_name(name: str) -> Found:
    from transformers.trainer_utils import SchedulerType

    names = [s.value for s in SchedulerType]
    if name in names:
        return []
    close = difflib.get_close_matches(name, names, n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    return [(("train", "lr_scheduler_type"), f"unknown scheduler {name!r}", f"{hint}valid: {', '.join(names)}")]


def check_scheduler(t, scheduler_kwargs) -> Found:
    """Build the scheduler on a one-tensor optimizer, as the Trainer will."""
    import torch
    from transformers import get_scheduler

    named = check_scheduler_name(t.lr_scheduler_type)
    if named:
        return named
    if t.lr_scheduler_type == "reduce_lr_on_plateau":
        return [(("train", "lr_scheduler_type"), "reduce_lr_on_plateau needs evaluation during training, which "
                 "grpokit does not run", "use cosine, linear or constant (grpokit eval scores the checkpoints)")]
    total = t.max_steps if t.max_steps > 0 else 100
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=t.learning_rate)
    try:
        get_scheduler(t.lr_scheduler_type, optimizer, num_warmup_steps=int(t.warmup_ratio * total),
                      num_training_steps=total, scheduler_specific_kwargs=scheduler_kwargs or {})
    except (ValueError, TypeError) as e:
        return [(("train", "lr_scheduler_type"), f"scheduler {t.lr_scheduler_type!r} cannot be built: {e}",
                 "give its arguments in trl.lr_scheduler_kwargs (e.g. {min_lr: 1e-7} for cosine_with_min_lr), or "
                 "pick another scheduler")]
    return []


# ---------------------------------------------------------------- trl pass-through
def check_trl(trl: dict, train_fields: list[str]) -> Found:
    """Keys of `trl:`: known GRPOConfig fields, not modelled elsewhere in the recipe, of the field's type."""
    from trl import GRPOConfig

    from grpokit.recipe.generation_section import GenerationConfig

    fields = {f.name: f for f in dataclasses.fields(GRPOConfig) if f.init}
    by_generation = {k for name in BACKENDS for k in GenerationConfig.model_construct(backend=name, cache="static")
                     .grpo_kwargs(on_gpu=True)} | {"use_transformers_paged"}  # TRL's deprecated spelling
    hints = typing.get_type_hints(GRPOConfig)
    out: Found = []
    for key, value in trl.items():
        loc = ("trl", key)
        if key in train_fields:
            out.append((loc, f"'{key}' is a train setting; the recipe models it", f"set train.{key} instead"))
        elif key in GRPOKIT_SETS:
            out.append((loc, f"'{key}' is set by grpokit", f"set it through {GRPOKIT_SETS[key]}"))
        elif key in by_generation:
            out.append((loc, f"'{key}' is set by the generation: section", "set it there (generation.backend: "
                        f"{' | '.join(BACKENDS)}, generation.cache, generation.continuous_config)"))
        elif key not in fields:
            close = difflib.get_close_matches(key, list(fields), n=1)
            out.append((loc, f"unknown GRPOConfig field '{key}'",
                        f"did you mean '{close[0]}'?" if close else "see TRL's GRPOConfig for the field names"))
        elif value is not None and (msg := type_problem(hints.get(key, Any), value)):
            out.append((loc, f"{msg} (got {value!r})", f"give a value of type {type_name(hints.get(key))}"))
        elif key in TRL_BOUNDS and isinstance(value, (int, float)):
            out += _out_of_bounds(loc, key, value, TRL_BOUNDS[key])
        elif key == "generation_kwargs" and isinstance(value, dict):
            for k, v in value.items():
                if k in GENERATION_LENGTHS:
                    out.append(((*loc, k), "the generation length is train.max_completion_length's (it is bounded, "
                                "and the memory plan and the truncation finding read it)",
                                f"remove trl.generation_kwargs.{k}; set train.max_completion_length instead"))
                elif k in GENERATION_BOUNDS and (type(v) is bool or not isinstance(v, (int, float))
                                               or (k == "top_k" and type(v) is not int)):
                    out.append(((*loc, k), f"{k} must be {'a whole number' if k == 'top_k' else 'a number'} (got "
                                f"{v!r})", f"give trl.generation_kwargs.{k} {'a whole number' if k == 'top_k' else 'a number'}"))
                elif k in GENERATION_BOUNDS:
                    out += _out_of_bounds((*loc, k), k, v, GENERATION_BOUNDS[k], f"generation_kwargs.{k}")
    out += non_finite(trl, ("trl",))
    if "report_to" in trl and not any(loc[:2] == ("trl", "report_to") for loc, _, _ in out):
        out += check_report_to(trl["report_to"])
    return out


def _out_of_bounds(loc: tuple, key: str, value, bounds: tuple, name: str | None = None) -> Found:
    lo, hi = bounds
    above = key in ABOVE
    if (value <= lo if above else value < lo) or (hi is not None and value > hi):
        low = f"> {lo}" if above else f">= {lo}"
        span = low if hi is None else f"{low} and <= {hi}"
        return [(loc, f"{key} must be {span} (got {value}; transformers refuses it)" if above and value == lo else
                 f"{key} must be {span} (got {value})", f"set trl.{name or key} {span}")]
    return []


def check_report_to(report_to) -> Found:
    known, installed = hf_internals.reporting_integrations()
    names = [report_to] if isinstance(report_to, str) else list(report_to or [])
    out: Found = []
    for name in names:
        if name in ("none", "all"):
            continue
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            out.append((("trl", "report_to"), f"unknown tracker {name!r}",
                        f"did you mean '{close[0]}'?" if close else "use tensorboard, trackio or wandb"))
        elif name not in installed:
            out.append((("trl", "report_to"), f"tracker {name!r} is not installed",
                        f"pip install {name}, or remove it from trl.report_to"))
    return out


def check_grpo_config(recipe) -> Found:
    """Build the GRPOConfig exactly as training will (grpokit.recipe.grpo_args) and report what it refuses."""
    from grpokit.recipe.trl_args import grpo_args

    with tempfile.TemporaryDirectory() as tmp:
        try:
            grpo_args(recipe, Path(tmp) / "run")
        except (ValueError, TypeError) as e:
            text = str(e)
            keys = [k for k in recipe.trl if k in text] or [k for k in type(recipe.train).model_fields if k in text]
            section = "trl" if keys and keys[0] in recipe.trl else "train"
            return [((section, keys[0]) if keys else (section,), f"TRL's GRPOConfig refuses it: {text}",
                     "change the value(s) it names")]
    return []
