"""The recipe's translation to TRL: the GRPOConfig and the prompt dataset GRPOTrainer receives.

    args = grpo_args(recipe, run_dir)                     # grpokit's settings, then the recipe's `trl:` on top
    dataset, dropped = build_prompt_dataset(rows, template, tokenizer, recipe.train.max_prompt_length)
    g = batch_geometry(recipe.train, recipe.trl, processes)  # prompts and completions a step and a round take

The recipe owns this translation: training builds its trainer from it, and `recipe check`
(grpokit.recipe.train_checks) builds the same GRPOConfig, so a value TRL refuses is reported before any model
loads. TRL and torch are imported inside the functions: reading a recipe stays light.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from grpokit import hf_internals
from grpokit.envs import max_tool_calling_iterations
from grpokit.errors import GrpokitError, Problem
from grpokit.run import RunDir
from grpokit.task import template_of
from grpokit.templates import PromptTemplate


def prompt_tokens(template: PromptTemplate, tokenizer, prompt, tools: list | None = None) -> int:
    """A built prompt's length in tokens as TRL counts it against max_prompt_length (tool schemas included): the
    one count training drops prompts by and `recipe check` reports."""
    return len(template.encode(tokenizer, prompt, tools))


def build_prompt_dataset(rows: list[dict], template: PromptTemplate, tokenizer, max_prompt_length: int | None,
                         tools: list | None = None):
    """The TRL dataset: each row plus its `prompt`; over-long prompts dropped and counted. `tools`: the schemas TRL
    renders into a tool episode's prompt (grpokit.envs.training_tools), counted in its length as TRL counts them."""
    from datasets import Dataset

    out, dropped = [], 0
    for row in rows:
        prompt = template.build(row["question"])
        if max_prompt_length and prompt_tokens(template, tokenizer, prompt, tools) > max_prompt_length:
            dropped += 1
            continue
        out.append({**row, "prompt": prompt})
    if not out:
        raise GrpokitError([Problem("train.max_prompt_length", f"all {len(rows)} prompts are longer than "
                                    f"{max_prompt_length} tokens", "raise train.max_prompt_length")])
    # use_json: a column may hold strings in some rows and message lists in others (questions), which Arrow refuses.
    return Dataset.from_list(out, on_mixed_types="use_json"), dropped


# ---------------------------------------------------------------- the batch geometry
@dataclass(frozen=True)
class BatchGeometry:
    """How many completions and prompts a training step and a generation round take, as TRL's GRPOConfig derives
    them from the recipe (train: and trl:) and the number of processes. Every caller asks here: recipe check (a
    dataset too small for one step, a batch num_generations does not divide), a launch (refill's whole groups per
    process), `grpokit train --dry-run`, the memory plan."""

    processes: int
    per_device: int  # per_device_train_batch_size: completions per process per micro-step
    accumulation: int  # gradient_accumulation_steps: micro-steps per optimizer step
    group: int  # num_generations: completions per prompt
    steps_per_generation: int  # micro-steps one generation round serves (TRL: gradient_accumulation_steps unless set)
    generation_batch: int  # completions one generation round makes on all processes together
    from_trl: str | None  # the trl: field that sets the round ("generation_batch_size", "steps_per_generation")

    @property
    def per_process(self) -> int:
        """Completions each process generates per round (refill keeps and replaces whole groups of them)."""
        return self.generation_batch // self.processes

    @property
    def prompts_per_round(self) -> int:
        """Distinct prompts one process takes per round (TRL's RepeatSampler drops a smaller last chunk)."""
        return max(1, self.per_process // self.group)

    @property
    def step_completions(self) -> int:
        return self.per_device * self.accumulation * self.processes

    def round_source(self) -> str:
        """Where the round's size comes from, as the recipe names it."""
        if self.from_trl == "generation_batch_size":
            return f"trl.generation_batch_size {self.generation_batch}"
        return (f"per_device_train_batch_size {self.per_device} x {self.from_trl or 'gradient_accumulation_steps'} "
                f"{self.steps_per_generation}")


def batch_geometry(train, trl: dict | None, processes: int = 1) -> BatchGeometry:
    """The batch geometry of a recipe's `train` and `trl` sections on `processes` processes (TRL's GRPOConfig
    rules: generation_batch_size = per_device_train_batch_size x steps_per_generation x processes unless set, and
    steps_per_generation = gradient_accumulation_steps unless set or implied by generation_batch_size)."""
    trl, n = trl or {}, max(1, processes)
    per_device, accumulation = train.per_device_train_batch_size, train.gradient_accumulation_steps
    if trl.get("generation_batch_size"):
        batch = int(trl["generation_batch_size"])
        steps = int(trl.get("steps_per_generation") or max(1, batch // (per_device * n)))
        source = "generation_batch_size"
    else:
        steps = int(trl.get("steps_per_generation") or accumulation)
        batch, source = per_device * steps * n, "steps_per_generation" if "steps_per_generation" in trl else None
    return BatchGeometry(n, per_device, accumulation, train.num_generations, steps, batch, source)


# ---------------------------------------------------------------- TRL config
def bf16_of(recipe) -> bool:
    """train.bf16 resolved on this machine: TRL's bf16 (autocast) for GRPO and SFT alike."""
    import torch

    if recipe.train.bf16 != "auto":
        return recipe.train.bf16
    if recipe.model.dtype not in ("auto", "bfloat16"):
        return False
    # On a CPU `auto` stays float32 even with bf16 instructions: bf16 training steps ran faster, but the demo learned
    # less reliably across seeds (docs/measurements.md "Generation choices on the CPU").
    return torch.cuda.is_available() and torch.cuda.is_bf16_supported()


def grpo_args(recipe, run_dir: Path):
    """The GRPOConfig for a recipe: grpokit's settings, then the recipe's `trl:` fields on top.

    Also what `recipe check` builds (grpokit.recipe.train_checks), so a value TRL refuses is reported before any
    model loads. Trackers are off unless trl.report_to names them; the run directory stays the record."""
    import torch
    from trl import GRPOConfig

    t = recipe.train
    on_gpu = torch.cuda.is_available()
    init_kwargs = {k: v for k, v in recipe.model.init_kwargs.items() if k != "quantization_config"}
    kwargs = dict(
        output_dir=str(RunDir(run_dir).checkpoints_dir),
        learning_rate=t.learning_rate, beta=t.beta, num_generations=t.num_generations,
        temperature=t.temperature, top_p=t.top_p, max_completion_length=t.max_completion_length,
        per_device_train_batch_size=t.per_device_train_batch_size,
        gradient_accumulation_steps=t.gradient_accumulation_steps,
        max_steps=t.max_steps, num_train_epochs=t.num_train_epochs, epsilon=t.epsilon, loss_type=t.loss_type,
        scale_rewards=t.scale_rewards, lr_scheduler_type=t.lr_scheduler_type, shuffle_dataset=t.shuffle_dataset,
        **({"use_adaptive_entropy": True, "entropy_target": t.entropy_target} if t.entropy_target else {}),
        warmup_steps=t.warmup_ratio,  # transformers 5 reads a float in [0, 1) as a ratio of the total steps
        weight_decay=t.weight_decay, max_grad_norm=t.max_grad_norm,
        logging_steps=t.logging_steps, save_strategy="steps", save_steps=t.save_steps,
        save_total_limit=t.save_total_limit, seed=t.seed,
        reward_weights=[r.weight for r in recipe.rewards],
        chat_template_kwargs=template_of(recipe).chat_template_kwargs() or None,
        max_tool_calling_iterations=max_tool_calling_iterations(recipe),  # grpokit.envs: tool episodes
        **hf_internals.checkpointing_kwargs(recipe.model.gradient_checkpointing is True),  # auto: decided by training
        # TRL builds the reference model (beta > 0) from these, like the policy grpokit loads.
        model_init_kwargs=init_kwargs or None,
        bf16=bf16_of(recipe),
        use_cpu=not on_gpu,
        report_to="none", run_name=Path(run_dir).name, project="grpokit",
        disable_tqdm=True, log_completions=False, remove_unused_columns=False,
        dataloader_num_workers=0,
        **recipe.generation.grpo_kwargs(on_gpu),  # use_vllm / vllm_* (nothing for the default hf backend)
    )
    kwargs.update(floats_where_meant(recipe.trl))
    return GRPOConfig(**kwargs)


# Sampling settings of `trl.generation_kwargs` that transformers' processors take as floats.
GENERATION_FLOATS = frozenset({"temperature", "top_p", "min_p", "typical_p", "repetition_penalty",
                               "encoder_repetition_penalty"})


def floats_where_meant(trl: dict) -> dict:
    """The recipe's `trl:` with an int read as a float where GRPOConfig (or, in generation_kwargs, a sampling setting)
    means a float. transformers' processors refuse an int (RepetitionPenaltyLogitsProcessor: `isinstance(penalty,
    float)`), so `repetition_penalty: 2` failed at step 0 through `generate` while grpokit's decoding loop, which
    reads float(), applied it: read as 2.0 here, both paths take it."""
    import typing

    from trl import GRPOConfig

    hints = typing.get_type_hints(GRPOConfig)
    out = {}
    for key, value in trl.items():
        if type(value) is int and _means_float(hints.get(key)):
            value = float(value)
        elif key == "generation_kwargs" and isinstance(value, dict):
            value = {k: float(v) if type(v) is int and k in GENERATION_FLOATS else v for k, v in value.items()}
        out[key] = value
    return out


def _means_float(annotation) -> bool:
    """float, or float | None (not int | float, nor a Union that takes an int as it is)."""
    import typing

    args = set(typing.get_args(annotation)) - {type(None)} if typing.get_args(annotation) else {annotation}
    return args == {float}
