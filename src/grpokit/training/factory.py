"""The one place grpokit's trainers are built from a recipe (grpokit.training.trainer has the classes and their parts).

    trainer = grpo_trainer(recipe, model, tokenizer, dataset, reward_funcs, run=run, ...)   # grpokit train
    trainer = episode_trainer(recipe, model, tokenizer, dataset, reward_funcs, folder, ...)  # tool evaluation
    trainer = sft_trainer(recipe, run, model, tokenizer, dataset, callbacks, log)           # grpokit sft

`grpokit train` (grpokit.training.grpo), `grpokit sft` (grpokit.training.sft), the tool evaluation
(grpokit.evaluation.tools) and the benchmarks build their trainers here, so a recipe's settings reach every
trainer the same way: TRL's config from the recipe (grpokit.recipe.grpo_args; `sft_args` below), the sampling part
from its generation section, the log-probs over the tree from train.shared_prefix, the loss steps from
train.skip_no_signal and generation.sampler_correction (or online RFT's, train.algorithm). Not covered: the run around a trainer (its folder, its
record, health rollbacks: grpokit.training.grpo and .lifecycle).
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import torch
from trl import SFTConfig

from grpokit import hf_internals
from grpokit.lora import peft_config
from grpokit.distributed import processes
from grpokit.health import HealthMonitor
from grpokit.recipe import Recipe, bf16_of, grpo_args
from grpokit.run import RunDir
from grpokit.training.logps import TreeLogps
from grpokit.training.sampler import SamplerCorrection
from grpokit.training.no_signal import SkipNoSignal
from grpokit.training.probe import HeldOutProbe
from grpokit.training.refill import selection_of
from grpokit.training.online_rft import OnlineRFT, RFTLoss
from grpokit.training.sampling import EpisodeSampling, Sampling
from grpokit.training.trainer import GrpokitSFTTrainer, GrpokitTrainer, Parts, SamplesSink
from grpokit.training.tracking import Progress


def loss_steps(recipe: Recipe) -> tuple:
    """The loss steps of a recipe, in the order they run before TRL's loss: the rows without signal dropped first
    (train.skip_no_signal), then the sampler correction on the rows kept (generation.sampler_correction; it does
    nothing while the policy samples itself). Online RFT (train.algorithm: rft): its SFT loss alone, in place of
    TRL's (a group that all scored the same carries no GRPO signal, but its right rows are RFT's)."""
    if recipe.train.algorithm == "rft":
        return (RFTLoss(),)
    skip = (SkipNoSignal(),) if recipe.train.skip_no_signal else ()
    return (*skip, SamplerCorrection(recipe.generation.sampler_correction))


def online_rft(recipe: Recipe) -> OnlineRFT | None:
    """The right-row marking of train.algorithm: rft, by the recipe's correctness reward (its logged name)."""
    if recipe.train.algorithm != "rft":
        return None
    from grpokit.task import reward_roles

    return OnlineRFT(next(n for n, role in reward_roles(recipe.rewards).items() if role == "correctness"))


def longest(recipe: Recipe) -> int:
    """Prompt + completion tokens the recipe allows: what the tree's refusal is judged on."""
    return (recipe.train.max_prompt_length or 0) + recipe.train.max_completion_length


def grpo_trainer(recipe: Recipe, model, tokenizer, dataset, reward_funcs: list, *, run: RunDir,
                 callbacks: list = (), health: HealthMonitor | None = None, probe: HeldOutProbe | None = None,
                 progress: Progress | None = None, log: Callable[[str], None] = print,
                 tool_kwargs: dict | None = None) -> GrpokitTrainer:
    """The trainer `grpokit train` runs: every part of grpokit.training.trainer.Parts, from the recipe, writing into
    `run` (its checkpoints, samples.jsonl, tensorboard/, the KL reference a rollback restored)."""
    sampling, args = Sampling(recipe.generation, recipe.train), grpo_args(recipe, run.path)
    args.generation_kwargs = sampling.generation_kwargs(model, args)  # TRL builds its generation config from them
    parts = Parts(sampling=sampling,
                  selection=selection_of(recipe, dataset, processes(), run.preflight_file),
                  logps=TreeLogps(recipe.train.shared_prefix, longest(recipe)), loss_steps=loss_steps(recipe),
                  rft=online_rft(recipe), probe=probe, health=health, samples=SamplesSink(run.samples, recipe.train.num_samples_logged),
                  progress=progress, reference=run, trackers=run.path, log=log)
    return GrpokitTrainer(parts, model=model, reward_funcs=reward_funcs, args=args, train_dataset=dataset,
                          processing_class=tokenizer, peft_config=peft_config(recipe.model.lora),
                          callbacks=list(callbacks), **(tool_kwargs or {}))


def episode_trainer(recipe: Recipe, model, tokenizer, dataset, reward_funcs: list, folder: Path, *,
                    generations: int, batch_rows: int, tool_kwargs: dict | None = None) -> GrpokitTrainer:
    """A trainer that plays and scores tool episodes on `dataset` (`trainer.evaluate()`: TRL's own multi-turn
    rollout, chat template and tool parser, as training plays them) without the evaluation loss; `generations`
    episodes per row, greedy for one; each prompt prefilled once (grpokit's decoding loop) as training samples.
    `folder`: a scratch folder for TRL's output_dir (nothing is saved there)."""
    args = grpo_args(recipe, folder)
    args.num_generations_eval = generations
    args.per_device_eval_batch_size = generations * batch_rows
    args.report_to = []
    args.reward_weights = [*args.reward_weights, *([0.0] * (len(reward_funcs) - len(args.reward_weights)))]
    if generations == 1:  # one episode per row: greedy (TRL samples unless told not to)
        args.generation_kwargs = {**(args.generation_kwargs or {}), "do_sample": False}
    hf = recipe.train.shared_prefix and recipe.generation.backend == "hf"  # each prompt prefilled once
    parts = Parts(sampling=EpisodeSampling(recipe.generation.top_p_candidates, recipe.generation.draw,
                                                  recipe.generation.compile) if hf else None, episodes_only=True)
    return GrpokitTrainer(parts, model=model, reward_funcs=reward_funcs, args=args, train_dataset=dataset,
                          eval_dataset=dataset, processing_class=tokenizer, **(tool_kwargs or {}))


def sft_args(recipe: Recipe, run: RunDir) -> SFTConfig:
    """TRL's SFTConfig from a recipe's train section (GRPO-only keys ignored), writing into `run`."""
    t = recipe.train
    on_gpu = torch.cuda.is_available()
    return SFTConfig(
        output_dir=str(run.checkpoints_dir), learning_rate=t.learning_rate, max_steps=t.max_steps,
        num_train_epochs=t.num_train_epochs, per_device_train_batch_size=t.per_device_train_batch_size,
        gradient_accumulation_steps=t.gradient_accumulation_steps, lr_scheduler_type=t.lr_scheduler_type,
        warmup_steps=t.warmup_ratio, weight_decay=t.weight_decay, max_grad_norm=t.max_grad_norm,
        logging_steps=t.logging_steps, save_strategy="steps", save_steps=t.save_steps,
        save_total_limit=t.save_total_limit, seed=t.seed,
        max_length=(t.max_prompt_length or 512) + t.max_completion_length,
        completion_only_loss=True, packing=False, dataset_num_proc=None,
        **hf_internals.checkpointing_kwargs(recipe.model.gradient_checkpointing is True),  # auto: decided before
        bf16=bf16_of(recipe),  # train.bf16, as GRPO resolves it
        use_cpu=not on_gpu, report_to="none", disable_tqdm=True, dataloader_num_workers=0,
    )


def sft_trainer(recipe: Recipe, run: RunDir, model, tokenizer, dataset, callbacks: list,
                log: Callable[[str], None] = print) -> GrpokitSFTTrainer:
    """The trainer `grpokit sft` runs: TRL's SFTTrainer on the recipe's rows, its loss over the tree of shared
    prefixes (train.shared_prefix)."""
    args = sft_args(recipe, run)
    return GrpokitSFTTrainer(TreeLogps(recipe.train.shared_prefix, args.max_length or 0, "SFT loss"), log,
                             model=model, args=args, train_dataset=dataset, processing_class=tokenizer,
                             peft_config=peft_config(recipe.model.lora), callbacks=list(callbacks))
