"""Training: grpokit's GRPO and SFT trainers, built from named parts, and the runs around them.

    result = train(load_recipe("recipes/smollm2-arithmetic.yaml"), run_dir="runs/demo")
    result.summary["status"], result.model, result.run_dir

trainer (GrpokitTrainer, GrpokitSFTTrainer: a batch's way, one method a step), factory (the one place the
trainers are built from a recipe: train, SFT, tool evaluation, benchmarks), grpo (train), lifecycle (one run's
life: folder, lock, resume, run.json; TrainResult), sft (SFT rows and train_sft), sampling, logps, no_signal,
selection and refill (the trainer's parts), callbacks, tracking (progress), rollback (health rollbacks), probe (the
held-out probe the health monitor reads), launch (several processes), lineage (--init-from). TRL's private parts
are reached through grpokit.internals only.
"""
from grpokit.training.grpo import train
from grpokit.training.launch import (LaunchOptions, accelerate_command, check_options, format_command, missing_here,
                                     mixed_precision_of, run_launch)
from grpokit.training.lifecycle import TrainResult
from grpokit.training.lineage import apply_init_from, prompt_drift
from grpokit.training.selection import check_processes
from grpokit.training.sft import train_sft

__all__ = ["LaunchOptions", "TrainResult", "accelerate_command", "apply_init_from", "check_options",
           "check_processes", "format_command", "missing_here", "mixed_precision_of", "prompt_drift", "run_launch",
           "train", "train_sft"]
