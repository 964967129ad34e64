"""Training: TRL's GRPOTrainer with grpokit's callbacks, and the workflows around it.

    summary = train(load_recipe("recipes/smollm2-arithmetic.yaml"), run_dir="runs/demo")

grpo (train), callbacks, tracking (progress), no_signal (skip zero-advantage rows), selection and refill
(which prompts train), rollback (health rollbacks), probe (the held-out probe the health monitor reads), launch (several processes),
lineage (--init-from: whether the prompts it warmed up on are this recipe's, the settings fit for continuing),
sft (TRL's SFTTrainer). TRL's private parts are reached through grpokit.internals.
"""
from grpokit.training.grpo import train
from grpokit.training.launch import (LaunchOptions, accelerate_command, check_options, format_command, missing_here,
                                     mixed_precision_of, run_launch)
from grpokit.training.lineage import apply_init_from, prompt_drift
from grpokit.training.selection import check_processes
from grpokit.training.sft import train_sft

__all__ = ["LaunchOptions", "accelerate_command", "apply_init_from", "check_options", "check_processes",
           "format_command", "missing_here", "mixed_precision_of", "prompt_drift", "run_launch", "train",
           "train_sft"]
