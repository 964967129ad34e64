"""Multi-process training: build and run the `accelerate launch` command.

    grpokit train RECIPE --num-processes 8 --accelerate-config zero3
    grpokit train RECIPE --num-processes 16 --num-machines 2 --machine-rank 0 \\
        --main-process-ip 10.0.0.1 --main-process-port 29500
    grpokit train RECIPE --num-processes 2 --dry-run      # print the command, run nothing

accelerate (and, under it, torchrun / DeepSpeed) does the launching; grpokit
only picks one of the configs it ships (adapted from TRL's own, see
accelerate_configs/*.yaml) or the user's file, passes the process layout on
the command line, and re-runs `grpokit train` with the same recipe arguments
in every process. `--num-processes` is accelerate's: the total over all
machines. On a machine without CUDA the DDP config runs with the gloo backend
(torchrun + `TrainingArguments(use_cpu=True)`); accelerate's own `--cpu` flag
is not used because it starts one process unless MPI is set up.

The rank helpers every process uses once launched (`is_main_process`, `barrier`, `broadcast`, `any_rank`)
are grpokit.distributed.

Not covered: SLURM/job-scheduler integration (docs/scale-out.md "Layouts" has an sbatch script built on this
command).
"""
from __future__ import annotations

import importlib.util
import os
import random
import shlex
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch

from grpokit import models
from grpokit.data import load_datasets
from grpokit.envs import tool_setup, training_tools
from grpokit.errors import GrpokitError, Problem
from grpokit.generation.backends import BACKENDS
from grpokit.generation.tree import refusal
from grpokit.preflight.memory import checkpointing_of, memory_report
from grpokit.recipe import batch_geometry, grpo_args
from grpokit.recipe.trl_args import bf16_of
from grpokit.task import template_of

CONFIG_DIR = Path(__file__).parent / "accelerate_configs"  # adapted from TRL's own
# name -> (file in CONFIG_DIR, python module the strategy needs beyond the default install)
ACCELERATE_CONFIGS = {
    "ddp": ("ddp.yaml", None),
    "zero2": ("zero2.yaml", "deepspeed"),
    "zero3": ("zero3.yaml", "deepspeed"),
    "fsdp": ("fsdp.yaml", None),
}
# torchrun gives workers this long to finish after it forwards SIGINT/SIGTERM (its default, 30 s, is too short
# to finish a step and save a large checkpoint; after it the workers are killed).
SHUTDOWN_TIMEOUT_S = 900


@dataclass
class LaunchOptions:
    num_processes: int
    accelerate_config: str = "ddp"
    num_machines: int = 1
    machine_rank: int = 0
    main_process_ip: str | None = None
    main_process_port: int | None = None


def config_file(name_or_path: str) -> Path:
    """A shipped config by name (ddp, zero2, zero3, fsdp) or the user's accelerate YAML file."""
    if name_or_path in ACCELERATE_CONFIGS:
        return CONFIG_DIR / ACCELERATE_CONFIGS[name_or_path][0]
    path = Path(name_or_path).expanduser()
    if not path.is_file():
        raise GrpokitError([Problem(f"--accelerate-config {name_or_path}", "neither a shipped config nor a file",
                                    f"use one of {', '.join(ACCELERATE_CONFIGS)} or the path of an accelerate "
                                    "config YAML (`accelerate config` writes one)")])
    return path.resolve()


# Strategies accelerate only shards on GPUs: on a machine without one its state is MULTI_CPU, which has no FSDP or
# DeepSpeed path (accelerate 1.15, state.py), and a launch with these configs would train plain DDP, silently.
SHARDED = ("zero2", "zero3", "fsdp")


def check_options(opts: LaunchOptions, *, need_modules: bool = True, cuda: bool = True) -> None:
    """Refuse a layout accelerate would reject later, or run as something else, each problem with its fix (before
    any process starts). `need_modules` and `cuda`: this machine is about to run it (not a dry run)."""
    problems = []
    if opts.num_processes < 1:
        problems.append(Problem("--num-processes", f"must be >= 1 (got {opts.num_processes})", "e.g. --num-processes 8"))
    if opts.num_machines < 1:
        problems.append(Problem("--num-machines", f"must be >= 1 (got {opts.num_machines})", "e.g. --num-machines 2"))
    elif opts.num_processes % opts.num_machines:
        problems.append(Problem("--num-processes", f"{opts.num_processes} processes do not split evenly over "
                                f"{opts.num_machines} machines", "--num-processes is the total over all machines "
                                "(GPUs per machine x machines)"))
    if not 0 <= opts.machine_rank < max(1, opts.num_machines):
        problems.append(Problem("--machine-rank", f"{opts.machine_rank} is not in 0..{opts.num_machines - 1}",
                                "number the machines 0 (the main one) to --num-machines - 1"))
    if opts.num_machines > 1 and not opts.main_process_ip:
        problems.append(Problem("--main-process-ip", "several machines need the address of machine 0",
                                "pass --main-process-ip (and --main-process-port) of the machine with rank 0"))
    module = ACCELERATE_CONFIGS.get(opts.accelerate_config, (None, None))[1]
    if need_modules and module and importlib.util.find_spec(module) is None:
        problems.append(Problem(f"--accelerate-config {opts.accelerate_config}", f"needs {module}, which is not "
                                "installed", f"pip install {module} (on the training machines), or use ddp/fsdp"))
    if need_modules and not cuda and opts.accelerate_config in SHARDED:
        problems.append(Problem(f"--accelerate-config {opts.accelerate_config}", "accelerate shards models only on "
                                "GPUs: on this machine without CUDA it would train plain DDP instead, silently",
                                "use --accelerate-config ddp here (or --dry-run to print the command for the GPU "
                                "machines)"))
    if problems:
        raise GrpokitError(problems)


def missing_here(opts: LaunchOptions) -> list[str]:
    """What this machine lacks to run `opts` (for a dry run's notes: the command is usually for other machines)."""
    module = ACCELERATE_CONFIGS.get(opts.accelerate_config, (None, None))[1]
    out = [f"{opts.accelerate_config} needs {module}, which is not installed here (pip install {module} on the "
           "training machines)"] if module and importlib.util.find_spec(module) is None else []
    return out


def mixed_precision_of(dtype: str) -> str:
    """accelerate's --mixed_precision for a recipe's model.dtype on GPUs, as training sets it (grpo_args: bf16 for
    auto and bfloat16; float32 and float16 weights train without autocast)."""
    return "bf16" if dtype in ("auto", "bfloat16") else "no"


def accelerate_command(train_argv: list[str], opts: LaunchOptions, *, mixed_precision: str,
                       python: str = sys.executable) -> list[str]:
    """`python -m accelerate.commands.launch ... -m grpokit train <train_argv>` for this layout.

    `train_argv` are the recipe arguments every process receives (recipe or --resume, --set, --output-dir, ...),
    without the launch flags, so the worker processes train instead of launching again.
    """
    cmd = [python, "-m", "accelerate.commands.launch", "--config_file", str(config_file(opts.accelerate_config)),
           "--num_processes", str(opts.num_processes), "--num_machines", str(opts.num_machines),
           "--machine_rank", str(opts.machine_rank)]
    if opts.main_process_ip:
        cmd += ["--main_process_ip", opts.main_process_ip]
    if opts.main_process_port:
        cmd += ["--main_process_port", str(opts.main_process_port)]
    # Always said, so the config file's own value never decides: "no" on a CPU (grpokit trains in the recipe's
    # dtype there, as one process does), the recipe's precision on GPUs (mixed_precision_of).
    cmd += ["--mixed_precision", mixed_precision]
    return cmd + ["-m", "grpokit", "train", *train_argv]


def format_command(cmd: list[str]) -> str:
    return " ".join(shlex.quote(c) for c in cmd)


def run_launch(cmd: list[str]) -> tuple[int, str | None]:
    """Run accelerate and wait; returns its exit code and the signal this process received, if any.

    Ctrl-C reaches the launcher through the terminal (same process group); SIGTERM sent to this process alone
    (a scheduler, `kill`) is passed on. torchrun forwards one signal to every worker, which finish the step,
    save and stop; the launcher itself then exits 1 with a SignalException traceback, which the caller judges
    by the run directory."""
    env = {**os.environ, "TORCH_ELASTIC_SHUTDOWN_TIMEOUT": os.environ.get("TORCH_ELASTIC_SHUTDOWN_TIMEOUT",
                                                                           str(SHUTDOWN_TIMEOUT_S))}
    proc = subprocess.Popen(cmd, env=env)
    got: list[str] = []

    def on_signal(signum, frame):
        got.append(signal.Signals(signum).name)
        if signum == signal.SIGTERM:
            proc.send_signal(signal.SIGTERM)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return proc.wait(), (got[0] if got else None)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def resolved_settings(recipe, num_processes: int = 1, strategy: str | None = None) -> list[str]:
    """What training would use, for `grpokit train --dry-run`: TRL's GRPOConfig as training builds it
    (grpokit.recipe.grpo_args, the same function) from the recipe, the fields that decide a run, one line per
    topic, and the memory plan's recommendation (grpokit.preflight.memory: config.json only). Loads no model."""
    with tempfile.TemporaryDirectory() as tmp:  # grpo_args names a run folder; nothing is written in it
        a = grpo_args(recipe, Path(tmp) / "run")
    t, n, cuda = recipe.train, max(1, num_processes), torch.cuda.is_available()
    g = batch_geometry(t, recipe.trl, n)
    length = f"{a.max_steps} steps (max_steps)" if a.max_steps > 0 else f"{a.num_train_epochs:g} epoch(s) of data.train"
    return [
        "settings training would use (TRL's GRPOConfig, built from the recipe as `grpokit train` builds it):",
        f"  batch       {g.step_completions} completions per step = {g.step_completions // g.group} prompt(s) x "
        f"{g.group} generations (per_device_train_batch_size {g.per_device} x "
        f"gradient_accumulation_steps {g.accumulation} x {n} process{'es' if n > 1 else ''}); "
        f"{g.per_process} generated per process every {g.steps_per_generation} micro-step(s)",
        f"  length      {length}; a log line every {a.logging_steps}, a checkpoint every {a.save_steps} "
        f"(keeps {a.save_total_limit})",
        f"  optimiser   learning_rate {a.learning_rate:g}, {getattr(a.lr_scheduler_type, 'value', a.lr_scheduler_type)} "
        f"schedule, warmup {a.warmup_steps:g}, weight_decay {a.weight_decay:g}, max_grad_norm {a.max_grad_norm:g}, "
        f"seed {a.seed}",
        ("  loss        online RFT (train.algorithm: rft): the SFT loss on the completions the correctness reward "
         "gives full marks, the rest dropped" if t.algorithm == "rft" else
         f"  loss        {a.loss_type}, beta {a.beta:g}" + (" (no reference model)" if a.beta == 0 else
                                                           " (a reference model: one more copy of the weights)")
         + f", epsilon {a.epsilon:g}, scale_rewards {a.scale_rewards}, num_iterations {a.num_iterations}"),
        f"  sampling    temperature {a.temperature:g}, top_p {a.top_p:g}",
        f"  lengths     prompt {'<= ' + str(t.max_prompt_length) if t.max_prompt_length else 'not cut'} tokens, "
        f"completion <= {a.max_completion_length}",
        f"  precision   {_precision(recipe, n, cuda)}",
        f"  memory      {_checkpointing(recipe, n, cuda)}"
        + (f", LoRA r={recipe.model.lora.r} ({recipe.model.lora.target_modules})" if recipe.model.lora else
           ", every weight trained"),
        f"  generation  {BACKENDS[recipe.generation.backend].describe(recipe.generation)}",
        f"  layout      {_layout(recipe)}",
        f"  device      {'cuda' if cuda else 'cpu (no CUDA GPU here)'}",
        f"  plan        {_plan(recipe, n, strategy)}",
    ]


def _layout(recipe) -> str:
    """How the loss lays the step out (`expected_layout`, below), or why it is not estimated here."""
    try:
        return expected_layout(recipe)
    except (GrpokitError, OSError, ValueError) as e:  # no config.json or data here: the dry run still answers
        return f"not estimated here: {getattr(e, 'problems', [e])[0]}"


def _checkpointing(recipe, n: int, cuda: bool) -> str:
    """Gradient checkpointing as training decides it on this machine (grpokit.preflight.memory.checkpointing_of)."""
    try:
        on, why = checkpointing_of(recipe, "cuda" if cuda else "cpu", n)
    except GrpokitError as e:
        return f"gradient checkpointing: not planned here ({e.problems[0].message})"
    return f"gradient checkpointing {'on' if on else 'off'} ({why})"


def _precision(recipe, n: int, cuda: bool) -> str:
    out = f"model.dtype {recipe.model.dtype}, bf16 autocast {'on' if bf16_of(recipe) else 'off'} here"
    out += "" if cuda else " (no CUDA GPU: the CPU trains in the weights' dtype)"
    if recipe.generation.backend == "hf" and recipe.generation.sampler_dtype != "same":
        out += f"; sampler {recipe.generation.sampler_dtype}, corrected by {recipe.generation.sampler_correction}"
    if n > 1:
        out += f"; the launch passes --mixed_precision {mixed_precision_of(recipe.model.dtype)} for the GPUs"
    return out


def _plan(recipe, n: int, strategy: str | None) -> str:
    try:
        plan = memory_report(recipe, n, strategy if strategy in ("ddp", "zero2", "zero3", "fsdp") else None)
    except GrpokitError as e:  # a model whose config.json is not on this machine: the dry run still answers
        return f"none here: {e.problems[0].message}"
    return f"{plan['recommendation']} (grpokit preflight RECIPE --memory: the table)"


# ---------------------------------------------------------------- the dry run's estimate of the loss's layout
def expected_layout(recipe, micro_batches: int = 32) -> str:
    """`grpokit train --dry-run`'s line about the loss's layout: TRL's (and why), or the most the tree computes as a
    share of TRL's layout, from the prompts of `micro_batches` micro-batches of the recipe's own rows (drawn with
    its seed), every completion at max_completion_length. Loads the tokenizer, the rows and the model's config
    (an empty model on the meta device for its modules), no weights."""
    from transformers import AutoConfig, AutoModelForCausalLM

    t = recipe.train
    if not t.shared_prefix:
        return "TRL's layout, one row per completion (train.shared_prefix: false)"
    path = models.resolve_model_path(recipe.model.name)
    config = AutoConfig.from_pretrained(path, **{k: v for k, v in recipe.model.init_kwargs.items()
                                                  if k == "attn_implementation"})
    with torch.device("meta"):
        empty = AutoModelForCausalLM.from_config(config)
    why = refusal(empty, longest=(t.max_prompt_length or 0) + t.max_completion_length)
    if why is not None:
        return f"TRL's layout, one row per completion: {why}"
    tokenizer, template = models.load_recipe_tokenizer(recipe.model), template_of(recipe)
    rows, _ = tool_setup(recipe, tokenizer, load_datasets(recipe)[0])  # a tool recipe's template, as training sets it
    per_micro = max(1, t.per_device_train_batch_size // t.num_generations)
    drawn = random.Random(t.seed).sample(rows, min(len(rows), per_micro * micro_batches))
    prompts = [template.encode(tokenizer, template.build(r["question"]), training_tools(recipe)) for r in drawn]
    steps = [prompts[i:i + per_micro] for i in range(0, len(prompts), per_micro)]
    shared = [len(_common_prefix(step)) for step in steps]
    ratio = expected_ratio([[len(p) for p in step] for step in steps], shared, t.num_generations,
                           t.max_completion_length)
    return (f"each distinct prefix once: at most {ratio:.2f}x the positions of TRL's layout in the loss "
            f"({len(steps)} micro-batches of this recipe's prompts, every completion at {t.max_completion_length} "
            "tokens; shorter or alike completions cost less)")


def _common_prefix(sequences: Sequence[Sequence[int]]) -> Sequence[int]:
    first = sequences[0]
    n = len(first)
    for other in sequences[1:]:
        n = next((i for i, (a, b) in enumerate(zip(first[:n], other)) if a != b), min(n, len(other)))
    return first[:n]


def expected_ratio(prompt_lengths: Sequence[Sequence[int]], shared: Sequence[int], generations: int,
                   completion_length: int) -> float:
    """Positions the tree computes over TRL's layout, for steps whose prompts have these token lengths (one list
    per step's micro-batch, each prompt once) and share `shared[i]` leading tokens, every completion at
    `completion_length` tokens and none alike: the most the tree costs (shorter or alike completions cost less).
    Each group's completions after the first need an anchor (grpokit.generation.tree)."""
    ours = trl = 0
    for lengths, common in zip(prompt_lengths, shared):
        ours += common + sum(p - common for p in lengths) + generations * len(lengths) * completion_length
        ours += (generations - 1) * len(lengths)
        trl += generations * len(lengths) * (max(lengths) + completion_length)
    return ours / trl if trl else 1.0
