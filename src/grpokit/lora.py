"""A recipe's LoRA settings: peft's config from model.lora, and whether its target modules name modules the model has.

    peft_config(recipe.model.lora)                  # a peft LoraConfig, or None for a full fine-tune
    lora_target_problem(name, ["q_proj", "v_proj"]) # (what, fix) when a target names no module of the model
"""
from __future__ import annotations

from grpokit.models import resolve_model_path


def module_names(name: str) -> list[str] | None:
    """Every module name of the model `name` (q_proj as model.layers.0.self_attn.q_proj), built on the meta device
    from its config.json alone (no weights read); None when the config cannot be read here (a hub id offline)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    try:
        config = AutoConfig.from_pretrained(resolve_model_path(name))
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
    except (OSError, ValueError, KeyError):
        return None
    return [n for n, _ in model.named_modules() if n]


def lora_target_problem(name: str, targets) -> tuple[str, str] | None:
    """(what, fix) when a LoRA target module names no module of the model (peft matches a target by the name's
    end: q_proj, self_attn.q_proj); None when every one does, for "all-linear", or when the model is not here."""
    if targets == "all-linear" or not targets:
        return None
    names = module_names(name)
    if names is None:
        return None
    missing = [t for t in targets if not any(n == t or n.endswith("." + t) for n in names)]
    if not missing:
        return None
    leaves = sorted({n.rsplit(".", 1)[-1] for n in names if not n.rsplit(".", 1)[-1].isdigit()})
    return (f"{', '.join(map(repr, missing))} name{'s' if len(missing) == 1 else ''} no module of {name}: peft would "
            "stop with a traceback when training starts",
            f"use names the model has (its modules: {', '.join(leaves[:30])}), or target_modules: all-linear")


def peft_config(lora) -> object | None:
    """A peft LoraConfig from the recipe's model.lora section (None: full fine-tune)."""
    if lora is None:
        return None
    from peft import LoraConfig

    return LoraConfig(
        r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
        target_modules=lora.target_modules, task_type="CAUSAL_LM",
    )
