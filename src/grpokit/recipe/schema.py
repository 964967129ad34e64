"""The recipe schema: every section of a recipe YAML as a typed pydantic model, with help text on every field.

    model / data / rewards / train / env / health / preflight / generation / selection / output_dir / trl

`train` uses TRL's own GRPOConfig names; `trl` passes any other GRPOConfig field as is; `health`,
`generation` and `selection` live in their own modules (health_section, generation_section,
selection_section) beside this one. Every section derives from `Section` (unknown keys are errors, inf
and nan are refused). Reading and validating a recipe file is grpokit.recipe.load; the checks that build
what training builds are grpokit.recipe.checks; the reference page of the docs is generated from the field
descriptions here (scripts/recipe_reference.py), so a field without one fails a test.

Relative data paths are resolved against the recipe file's folder (so a recipe travels with its data),
`output_dir` against the current directory. `builtin:<path>` names a file bundled with grpokit
(`builtin:arithmetic/train.jsonl`), `hf:<dataset id>` a Hugging Face hub dataset (needs network).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, field_validator

# data.paths itself, not the data package: the schema stays model-free (an import-linter contract)
from grpokit.data.paths import resolve_data_path
from grpokit.recipe.generation_section import GenerationConfig
from grpokit.recipe.health_section import HealthConfig
from grpokit.recipe.section import Section
from grpokit.recipe.selection_section import SelectionConfig
from grpokit.rewards import ROLES


def _home(path: str | None) -> str | None:
    """`~` and `~user` expanded, as a shell would (data paths expand it too, in grpokit.data.paths)."""
    return os.path.expanduser(path) if isinstance(path, str) else path


# Upper bounds of the numeric train fields: each far above any real run, so only a typo or a hostile recipe meets
# one, and `recipe check` refuses it with the allowed range instead of training (or allocating) for it.
MAX_STEPS = 1_000_000  # optimizer steps: at a second a step, 11 days; GRPO runs take hundreds to a few thousand
MAX_EPOCHS = 10_000  # passes over the data: RL fine-tuning makes a few
MAX_LEARNING_RATE = 1.0  # AdamW steps diverge long before 1 (RL fine-tuning uses 1e-7 to 1e-4, LoRA up to ~1e-3)
MAX_BETA = 100.0  # KL coefficient: 0 to 0.1 in the literature; 100 already pins the policy to the reference
MAX_TEMPERATURE = 10.0  # sampling above ~2 is noise; 10 keeps room for experiments
MAX_TOKENS = 1 << 20  # prompt and completion lengths: no model grpokit trains reads a longer context
MAX_BATCH = 65_536  # group size, micro-batch, accumulation: each is a multiplier on memory or time
MAX_THREADS = 1024  # CPU threads: the largest machines have a few hundred cores; 100,000 crashed torch's pool
MAX_SEED = 2**32 - 1  # numpy's seeds (transformers' set_seed seeds it too) end here


class LoraConfig(Section):
    r: int = Field(16, ge=1, le=MAX_BATCH, description="LoRA rank: the adapter's inner dimension.")
    alpha: int = Field(32, ge=1, le=MAX_BATCH, description="LoRA scaling numerator (effective scale alpha/r).")
    dropout: float = Field(0.05, ge=0.0, lt=1.0, description="Dropout on the adapter input.")
    target_modules: list[str] | Literal["all-linear"] = Field(
        "all-linear", description="Module names to adapt, e.g. [q_proj, v_proj], or 'all-linear'."
    )


class ModelConfig(Section):
    name: str = Field(
        "default",
        description="'default' (the embedded SmolLM2-135M-Instruct), a Hugging Face id such as "
        "Qwen/Qwen3-0.6B-Base, or a local model folder.",
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="Weights dtype; 'auto' is float32 on CPU and bfloat16 on a GPU that supports it."
    )
    lora: LoraConfig | None = Field(None, description="Train a LoRA adapter instead of all weights.")
    enable_thinking: bool | None = Field(
        None, description="Qwen3 chat templates: turn the <think> block on or off (null: template default)."
    )
    gradient_checkpointing: bool | Literal["auto"] = Field(
        "auto", description="Recompute activations in the backward pass instead of storing them: less memory, "
        "usually ~20-30% more step time on a GPU. auto: on only where the memory plan (grpokit preflight "
        "--memory) without it does not fit the device (85% of the GPU's memory, or of the machine's RAM on a "
        "CPU); training says which it chose, and why, in its first lines."
    )
    init_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Extra from_pretrained arguments, e.g. {attn_implementation: sdpa} or "
        "QLoRA's {quantization_config: {load_in_4bit: true, bnb_4bit_quant_type: nf4}} (needs bitsandbytes and "
        "model.lora). The dtype is model.dtype.")


class DataConfig(Section):
    train: str = Field(
        ..., description="Training rows: a .jsonl/.json/.csv/.parquet path, builtin:<path> or hf:<dataset id>."
    )
    eval: str | None = Field(None, description="Held-out rows (same forms as train). If unset, eval_fraction is split off.")
    eval_fraction: float = Field(0.1, ge=0.0, lt=1.0, description="Share of train held out when eval is unset.")
    eval_max_rows: int | None = Field(None, ge=1, description="Evaluate on at most this many held-out rows.")
    hf_config: str | None = Field(None, description="Hub dataset config name (e.g. 'main' for openai/gsm8k).")
    train_split: str = Field("train", description="Hub split used for training.")
    eval_split: str | None = Field(None, description="Hub split used for eval (e.g. 'test').")
    template: Literal["plain_zh", "plain_en", "chat"] = Field(
        "chat",
        description="plain_zh / plain_en: the fixed plain-text template for base models; chat: the tokenizer's "
        "chat template.",
    )
    system_prompt: str | None = Field(None, description="System message for the chat template.")
    question_field: str | None = Field(None, description="Column holding the question (default: question, then prompt).")
    answer_field: str | None = Field(
        None, description="Column holding the gold answer (default: answer, then expected_answer)."
    )
    skip_bad_rows: bool = Field(False, description="Skip unusable rows (and say how many) instead of refusing the file.")
    shuffle_seed: int = Field(0, ge=0, le=MAX_SEED, description="Seed of the train/eval split.")


class RewardConfig(Section):
    name: str | None = Field(None, description="A built-in reward (grpokit rewards list), or your own function as "
                             "module:function (or module.function).")
    path: str | None = Field(None, description="Your own reward function's .py file (relative to the recipe); with "
                             "`function`.")
    function: str | None = Field(None, description="The function's name in `path`.")
    role: Literal[ROLES] | None = Field(None, description="Own rewards only: correctness (default), format, shaping "
                                        "or penalty; built-in rewards declare theirs.")
    weight: float = Field(1.0, description="Weight in the summed reward.")
    params: dict[str, Any] = Field(default_factory=dict, description="Parameters of the reward factory (own "
                                   "functions: extra keyword arguments).")
    timeout_s: float | None = Field(None, gt=0, le=86400, description="Own rewards only: seconds one call may "
                                    "take in training before it is stopped and the step fails (null: no deadline; "
                                    "`recipe check` stops a trial call after this, or 60 s).")

    _expand_path = field_validator("path")(_home)


class EnvConfig(Section):
    """A tool-calling environment (grpokit.envs): TRL's environment_factory runs the episodes."""

    name: Literal["calculator", "repofix"] = Field(..., description="Environment (grpokit.envs.ENVIRONMENTS).")
    params: dict[str, Any] = Field(default_factory=dict, description="Constructor arguments, e.g. repofix "
                                   "{max_steps: 8, sandbox: bwrap}.")
    max_tool_calling_iterations: int | None = Field(
        4, ge=1, description="TRL's cap on tool-call rounds per episode (null: until the model stops calling).")


class TrainConfig(Section):
    """GRPO settings, named as in TRL's GRPOConfig and passed through to it."""

    algorithm: Literal["grpo", "rft"] = Field(
        "grpo", description="grpo: TRL's GRPO loss. rft: online rejection-sampling fine-tuning (RAFT, expert "
        "iteration): each step's samples drawn and scored as GRPO's, the completions its correctness reward gives "
        "full marks trained with the SFT loss on the model's own tokens, the rest dropped (grpokit.training.online_rft). "
        "Needs a correctness reward and temperature 1.0; the loss settings (loss_type, epsilon, beta, "
        "scale_rewards, skip_no_signal, the sampler correction) do not apply.")
    learning_rate: float = Field(1e-6, gt=0, le=MAX_LEARNING_RATE, description="Optimizer step size.")
    beta: float = Field(0.0, ge=0, le=MAX_BETA, description="KL coefficient; 0 skips the reference model entirely.")
    num_generations: int = Field(8, ge=2, le=MAX_BATCH, description="Completions sampled per prompt (the GRPO group).")
    temperature: float = Field(1.0, gt=0, le=MAX_TEMPERATURE, description="Sampling temperature during training.")
    top_p: float = Field(1.0, gt=0, le=1, description="Nucleus sampling during training.")
    max_prompt_length: int | None = Field(
        512, ge=1, le=MAX_TOKENS, description="Longer prompts are dropped with a report (TRL 1.16 no longer truncates)."
    )
    max_completion_length: int = Field(256, ge=1, le=MAX_TOKENS, description="Most new tokens per completion.")
    per_device_train_batch_size: int = Field(8, ge=1, le=MAX_BATCH, description="Completions per device per micro-batch.")
    gradient_accumulation_steps: int = Field(1, ge=1, le=MAX_BATCH, description="Micro-batches per optimizer step.")
    max_steps: int = Field(-1, ge=-1, le=MAX_STEPS, description="Optimizer steps (at least 1); -1 uses "
                           "num_train_epochs.")
    num_train_epochs: float = Field(1.0, gt=0, le=MAX_EPOCHS, description="Passes over the data when max_steps is -1.")
    epsilon: float = Field(0.2, gt=0, lt=1, description="PPO-style ratio clip.")
    loss_type: Literal["grpo", "dapo", "dr_grpo", "bnpo", "cispo", "sapo", "luspo", "vespo"] = Field(
        "dapo", description="TRL loss aggregation."
    )
    scale_rewards: Literal["group", "batch", "none"] = Field("group", description="Advantage normalisation.")
    lr_scheduler_type: str = Field("constant", description="transformers scheduler name (cosine, linear, constant...).")
    warmup_ratio: float = Field(0.0, ge=0, lt=1, description="Share of steps spent warming the learning rate up.")
    weight_decay: float = Field(0.0, ge=0, le=1, description="AdamW weight decay (decoupled: at most 1).")
    max_grad_norm: float = Field(1.0, gt=0, description="Gradient clipping.")
    logging_steps: int = Field(1, ge=1, le=MAX_STEPS, description="Write metrics every N steps.")
    save_steps: int = Field(50, ge=1, le=MAX_STEPS, description="Save a checkpoint every N steps.")
    save_total_limit: int | None = Field(None, ge=1, le=MAX_STEPS, description="Keep at most N checkpoints (oldest "
                                         "deleted).")
    seed: int = Field(0, ge=0, le=MAX_SEED, description="Seed for sampling and initialisation.")
    num_samples_logged: int = Field(4, ge=0, le=MAX_BATCH, description="Completions written to samples.jsonl each "
                                    "logging step.")
    skip_no_signal: bool = Field(
        True, description="Skip the forward/backward pass on completions with zero advantage (groups that all "
        "scored the same); exact, so only time changes. Applies with beta 0 and loss_type dapo/cispo/vespo "
        "(grpokit.training.no_signal).")
    shared_prefix: bool = Field(
        True, description="Compute every distinct token prefix once: a group's prompt once (not once per "
        "completion) and each completion to its own length, in sampling, in the loss's log-probs and in SFT "
        "(grpokit.generation.tree); exact, so only time changes. Models it cannot be exact on (attention other "
        "than eager/SDPA, no rotary positions, sliding windows) use TRL's layout, said in one line. false: TRL's "
        "layout and transformers' generate everywhere.")
    torch_threads: int | None = Field(None, ge=1, le=MAX_THREADS, description="CPU threads for torch (default: all "
                                      "cores).")
    bf16: Literal["auto", True, False] = Field(
        "auto", description="bfloat16 autocast for the step (TRL's bf16: generation, loss forward and backward "
        "in bf16, fp32 master weights and optimizer). auto: on a GPU that supports bf16 when model.dtype is auto "
        "or bfloat16, off on a CPU. true: on anywhere (on a CPU with AVX-512 BF16 or AMX the demo's steps ran faster, but "
        "it learned less reliably across seeds: docs/measurements.md 'Generation choices on the CPU'); false: off.")
    shuffle_dataset: bool = Field(True, description="TRL shuffles the training prompts; false keeps the file's order "
                                  "(e.g. a curriculum). selection.enabled chooses prompts itself and ignores it.")
    entropy_target: float | None = Field(
        None, gt=0, description="Entropy guard: when the mean token entropy (nats) falls to this, TRL's adaptive "
        "entropy bonus engages (Skywork-OR1; use_adaptive_entropy). Set it near the entropy logged early in "
        "training; null: off. skip_no_signal stands aside while it is on (the bonus has a gradient everywhere).")

    @field_validator("max_steps")
    @classmethod
    def _steps(cls, v: int) -> int:
        if v == 0:  # TRL would train one step ("step 1/0"): 0 means no training, which is no run
            raise ValueError("must be at least 1, or -1 to train for num_train_epochs")
        return v


class PreflightConfig(Section):
    """A short preflight (grpokit.preflight) before `grpokit train`; 0 prompts turns it off."""

    prompts: int = Field(0, ge=0, description="Training prompts sampled before training (0: no preflight).")
    generations: int | None = Field(None, ge=2, description="Completions per prompt (default: train.num_generations).")


class Recipe(Section):
    model: ModelConfig = Field(default_factory=ModelConfig, description="The model to train (default: the embedded one).")
    data: DataConfig = Field(..., description="Training and held-out rows, their columns and the prompt template.")
    rewards: list[RewardConfig] = Field(..., min_length=1, description="The rewards, summed with their weights "
                                        "(`grpokit rewards list`); at least one.")
    train: TrainConfig = Field(default_factory=TrainConfig, description="GRPO settings, named as in TRL's "
                               "GRPOConfig.")
    env: EnvConfig | None = Field(None, description="Tool-calling environment; unset: single-turn completions.")
    health: HealthConfig = Field(default_factory=HealthConfig, description="Training health detectors and actions.")
    preflight: PreflightConfig = Field(default_factory=PreflightConfig, description="Baseline rollouts before training.")
    generation: GenerationConfig = Field(default_factory=GenerationConfig, description="hf generate or vLLM (TRL).")
    selection: SelectionConfig = Field(default_factory=SelectionConfig,
                                       description="Which prompts each step trains on (grpokit.training.selection).")
    output_dir: str = Field("runs/grpokit", min_length=1, pattern=r"\S", description="Run directory (config, "
                            "metrics, samples, checkpoints); never empty (that would be the current folder).")
    trl: dict[str, Any] = Field(
        default_factory=dict, description="Any other TRL GRPOConfig field, passed as is (report_to, epsilon_high, "
        "mask_truncated_completions, num_iterations, generation_batch_size, ...). Checked by building the "
        "GRPOConfig; fields the recipe models elsewhere (train.*, model.*) are refused here.")
    # Where the recipe came from; used to resolve relative data paths. Not part of the YAML.
    source: str | None = Field(None, exclude=True)
    # What validation could not check (e.g. a hub id while offline); printed by `recipe check` and `train`.
    notes: list[str] = Field(default_factory=list, exclude=True)

    _expand_output_dir = field_validator("output_dir")(_home)  # `output_dir: ~/x` made a folder named `~`

    def resolve_data_path(self, spec: str) -> str:
        return resolve_data_path(spec, Path(self.source).parent if self.source else Path.cwd())

    def read_paths(self) -> list[str]:
        """Files a run of this recipe reads (the recipe, its data, a local model): a folder holding one is never a
        run directory (grpokit.run.ownership)."""
        data = [self.resolve_data_path(p) for p in (self.data.train, self.data.eval) if p]
        paths = [self.source, *data, self.model.name]
        return [p for p in paths if p and not str(p).startswith(("hf:", "builtin:")) and Path(p).exists()]

    def for_run(self, run_dir: str | Path) -> "Recipe":
        """The recipe as a run directory records it (config.yaml): absolute data and reward paths, the run's
        own output_dir, so the run reads the same files from any directory later."""
        data = self.data.model_copy(update={
            k: (self.resolve_data_path(v) if v else v) for k, v in (("train", self.data.train), ("eval", self.data.eval))
        })
        base = Path(self.source).parent if self.source else Path.cwd()
        rewards = [r.model_copy(update={"path": str((base / r.path).resolve())}) if r.path else r for r in self.rewards]
        return self.model_copy(update={"data": data, "output_dir": str(run_dir), "rewards": rewards})

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False, allow_unicode=True)
