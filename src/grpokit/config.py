"""The recipe: a typed, validated YAML description of one GRPO experiment.

    grpokit train recipes/smollm2-arithmetic.yaml --set train.learning_rate=2e-5

`load_recipe(path, overrides)` reads the YAML, applies `--set` overrides and
validates everything before any model loads, building what training will
build (grpokit.config_checks: reward factories, scheduler, GRPOConfig, model
folder). Every problem is reported at once, each with `file:line field`, what
is wrong and the fix (unknown keys get a "did you mean"), then `GrpokitError`
(exit code 2) is raised. Reading the file (UTF-8, YAML, duplicate keys,
`--set`) is grpokit.config_yaml.

Sections: `model`, `data`, `rewards`, `train` (TRL's own GRPOConfig names),
`health` (detector thresholds and actions: the one place they are documented),
`preflight`, `output_dir`, `trl` (any other GRPOConfig field, passed as is).
Relative data paths are resolved against the recipe file's folder (so a recipe travels with its data); `output_dir` against the current
directory. `builtin:<path>` names a file bundled with grpokit
(`builtin:arithmetic/train.jsonl`), `hf:<dataset id>` a Hugging Face hub
dataset (needs network).
"""
from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError

from grpokit.config_yaml import apply_override, line_map, parse_yaml, read_recipe_text
from grpokit.errors import GrpokitError, Problem
from grpokit.config_section import _Section
# The health section (codes, actions, every detector threshold) lives in config_health.py; re-exported.
from grpokit.config_health import HEALTH_CODES, HealthAction, HealthActions, HealthConfig  # noqa: F401
from grpokit.vllm_config import GenerationConfig, check_generation, check_generation_machine
from grpokit.rewards.registry import ROLES
from grpokit.selection import SelectionConfig

BUILTIN_DATA = Path(__file__).parent / "datasets"


class LoraConfig(_Section):
    r: int = Field(16, ge=1, description="LoRA rank: the adapter's inner dimension.")
    alpha: int = Field(32, ge=1, description="LoRA scaling numerator (effective scale alpha/r).")
    dropout: float = Field(0.05, ge=0.0, lt=1.0, description="Dropout on the adapter input.")
    target_modules: list[str] | Literal["all-linear"] = Field(
        "all-linear", description="Module names to adapt, e.g. [q_proj, v_proj], or 'all-linear'."
    )


class ModelConfig(_Section):
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
    gradient_checkpointing: bool = Field(
        False, description="Recompute activations in the backward pass instead of storing them: less memory. "
        "On the 2-core CPU it cost no measurable time for SmolLM2-135M (peak 7.4 -> 5.0 GiB); on a GPU it "
        "usually costs ~20-30% step time."
    )
    init_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Extra from_pretrained arguments, e.g. {attn_implementation: sdpa} or "
        "QLoRA's {quantization_config: {load_in_4bit: true, bnb_4bit_quant_type: nf4}} (needs bitsandbytes and "
        "model.lora). The dtype is model.dtype.")


class DataConfig(_Section):
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
    shuffle_seed: int = Field(0, description="Seed of the train/eval split.")


class RewardConfig(_Section):
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


class EnvConfig(_Section):
    """A tool-calling environment (grpokit.envs): TRL's environment_factory runs the episodes."""

    name: Literal["calculator", "repofix"] = Field(..., description="Environment (grpokit.envs.ENVIRONMENTS).")
    params: dict[str, Any] = Field(default_factory=dict, description="Constructor arguments, e.g. repofix "
                                   "{max_steps: 8, sandbox: bwrap}.")
    max_tool_calling_iterations: int | None = Field(
        4, ge=1, description="TRL's cap on tool-call rounds per episode (null: until the model stops calling).")


class TrainConfig(_Section):
    """GRPO settings, named as in TRL's GRPOConfig and passed through to it."""

    learning_rate: float = Field(1e-6, gt=0, description="Optimizer step size.")
    beta: float = Field(0.0, ge=0, description="KL coefficient; 0 skips the reference model entirely.")
    num_generations: int = Field(8, ge=2, description="Completions sampled per prompt (the GRPO group).")
    temperature: float = Field(1.0, gt=0, description="Sampling temperature during training.")
    top_p: float = Field(1.0, gt=0, le=1, description="Nucleus sampling during training.")
    max_prompt_length: int | None = Field(
        512, ge=1, description="Longer prompts are dropped with a report (TRL 1.16 no longer truncates)."
    )
    max_completion_length: int = Field(256, ge=1, description="Most new tokens per completion.")
    per_device_train_batch_size: int = Field(8, ge=1, description="Completions per device per micro-batch.")
    gradient_accumulation_steps: int = Field(1, ge=1, description="Micro-batches per optimizer step.")
    max_steps: int = Field(-1, ge=-1, description="Optimizer steps; -1 uses num_train_epochs.")
    num_train_epochs: float = Field(1.0, gt=0, description="Passes over the data when max_steps is -1.")
    epsilon: float = Field(0.2, gt=0, lt=1, description="PPO-style ratio clip.")
    loss_type: Literal["grpo", "dapo", "dr_grpo", "bnpo", "cispo", "sapo", "luspo", "vespo"] = Field(
        "dapo", description="TRL loss aggregation."
    )
    scale_rewards: Literal["group", "batch", "none"] = Field("group", description="Advantage normalisation.")
    lr_scheduler_type: str = Field("constant", description="transformers scheduler name (cosine, linear, constant...).")
    warmup_ratio: float = Field(0.0, ge=0, lt=1, description="Share of steps spent warming the learning rate up.")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay.")
    max_grad_norm: float = Field(1.0, gt=0, description="Gradient clipping.")
    logging_steps: int = Field(1, ge=1, description="Write metrics every N steps.")
    save_steps: int = Field(50, ge=1, description="Save a checkpoint every N steps.")
    save_total_limit: int | None = Field(None, ge=1, description="Keep at most N checkpoints (oldest deleted).")
    seed: int = Field(0, description="Seed for sampling and initialisation.")
    num_samples_logged: int = Field(4, ge=0, description="Completions written to samples.jsonl each logging step.")
    skip_no_signal: bool = Field(
        True, description="Skip the forward/backward pass on completions with zero advantage (groups that all "
        "scored the same); exact, so only time changes. Applies with beta 0 and loss_type dapo/cispo/vespo "
        "(grpokit.no_signal).")
    torch_threads: int | None = Field(None, ge=1, description="CPU threads for torch (default: all cores).")
    shuffle_dataset: bool = Field(True, description="TRL shuffles the training prompts; false keeps the file's order "
                                  "(e.g. a curriculum). selection.enabled chooses prompts itself and ignores it.")
    entropy_target: float | None = Field(
        None, gt=0, description="Entropy guard: when the mean token entropy (nats) falls to this, TRL's adaptive "
        "entropy bonus engages (Skywork-OR1; use_adaptive_entropy). Set it near the entropy logged early in "
        "training; null: off. skip_no_signal stands aside while it is on (the bonus has a gradient everywhere).")


class PreflightConfig(_Section):
    """A short preflight (grpokit.preflight) before `grpokit train`; 0 prompts turns it off."""

    prompts: int = Field(0, ge=0, description="Training prompts sampled before training (0: no preflight).")
    generations: int | None = Field(None, ge=2, description="Completions per prompt (default: train.num_generations).")


class Recipe(_Section):
    model: ModelConfig = Field(default_factory=ModelConfig)
    data: DataConfig
    rewards: list[RewardConfig] = Field(..., min_length=1)
    train: TrainConfig = Field(default_factory=TrainConfig)
    env: EnvConfig | None = Field(None, description="Tool-calling environment; unset: single-turn completions.")
    health: HealthConfig = Field(default_factory=HealthConfig, description="Training health detectors and actions.")
    preflight: PreflightConfig = Field(default_factory=PreflightConfig, description="Baseline rollouts before training.")
    generation: GenerationConfig = Field(default_factory=GenerationConfig, description="hf generate or vLLM (TRL).")
    selection: SelectionConfig = Field(default_factory=SelectionConfig,
                                       description="Which prompts each step trains on (grpokit.selection).")
    output_dir: str = Field("runs/grpokit", description="Run directory (config, metrics, samples, checkpoints).")
    trl: dict[str, Any] = Field(
        default_factory=dict, description="Any other TRL GRPOConfig field, passed as is (report_to, epsilon_high, "
        "mask_truncated_completions, num_iterations, generation_batch_size, bf16, ...). Checked by building the "
        "GRPOConfig; fields the recipe models elsewhere (train.*, model.*) are refused here.")
    # Where the recipe came from; used to resolve relative data paths. Not part of the YAML.
    source: str | None = Field(None, exclude=True)
    # What validation could not check (e.g. a hub id while offline); printed by `recipe check` and `train`.
    notes: list[str] = Field(default_factory=list, exclude=True)

    def resolve_data_path(self, spec: str) -> str:
        return resolve_data_path(spec, Path(self.source).parent if self.source else Path.cwd())

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False, allow_unicode=True)


# ---------------------------------------------------------------- path helpers
def resolve_data_path(spec: str, base: Path) -> str:
    if spec.startswith("hf:"):
        return spec
    if spec.startswith("builtin:"):
        return str(BUILTIN_DATA / spec[len("builtin:"):])
    p = Path(spec).expanduser()
    return str(p if p.is_absolute() else (base / p).resolve())


# ---------------------------------------------------------------- validation
def _fix_for(err: dict, model_fields: list[str]) -> str:
    kind, loc, ctx = err["type"], err["loc"], err.get("ctx") or {}
    field = ".".join(str(x) for x in loc)
    if kind == "extra_forbidden":
        close = difflib.get_close_matches(str(loc[-1]), model_fields, n=1)
        return f"did you mean '{close[0]}'? otherwise remove it" if close else f"remove it; valid keys: {', '.join(model_fields)}"
    if kind == "missing":
        return f"add {field}"
    if kind == "too_short" and loc == ("rewards",):
        return "add at least one reward, e.g. `- name: math_correctness` (see `grpokit rewards list`)"
    if kind == "too_short":
        return f"give {field} at least {ctx.get('min_length')} item(s)"
    if kind == "finite_number":
        return f"give {field} a finite number"
    for bound, word in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
        if bound in ctx:
            return f"set {field} {word} {ctx[bound]}"
    if kind == "literal_error":
        return f"use one of {ctx.get('expected')}"
    if kind.endswith("_type") or kind.endswith("_parsing"):
        return f"give {field} a value of the right type ({err['msg'].lower()})"
    return ""


def _fields_at(loc: tuple) -> list[str]:
    """Valid keys of the section an error points into (for 'did you mean')."""
    model: type[BaseModel] = Recipe
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        f = model.model_fields.get(str(part))
        if f is None:
            return []
        ann = f.annotation
        candidates = [ann, *getattr(ann, "__args__", ())]
        for c in candidates:
            inner = getattr(c, "__args__", ())
            for cc in (c, *inner):
                if isinstance(cc, type) and issubclass(cc, BaseModel):
                    model = cc
                    break
    return [k for k in model.model_fields if k not in ("source", "notes")]


# What the caller is about to do with the recipe on this machine (see load_recipe).
Use = Literal["run", "train", "check"]


def _semantic_problems(raw: dict, base: Path, broken: set[str],
                       use: Use = "run") -> tuple[list[tuple[tuple, str, str]], list[str]]:
    """Build what training will build (grpokit.config_checks) from every section that parsed: (problems, notes)."""
    from grpokit import config_checks as cc

    def section(key, model):
        if key in broken:
            return None
        try:
            return model.model_validate(raw.get(key) or {})
        except ValidationError:
            return None

    out, notes = [], []
    train, data, model = section("train", TrainConfig), section("data", DataConfig), section("model", ModelConfig)
    trl = None if "trl" in broken or not isinstance(raw.get("trl") or {}, dict) else dict(raw.get("trl") or {})
    rewards = None
    if "rewards" not in broken and isinstance(raw.get("rewards"), list):
        try:
            rewards = [RewardConfig.model_validate(r) for r in raw["rewards"]]
        except ValidationError:
            pass
    if trl is not None:
        out += cc.check_trl(trl, list(TrainConfig.model_fields))
    if train is not None:
        out += cc.check_train(train, trl or {})
    elif isinstance(raw.get("train"), dict) and isinstance(raw["train"].get("lr_scheduler_type"), str):
        out += cc.check_scheduler_name(raw["train"]["lr_scheduler_type"])  # still reported when train is broken
    if data is not None:
        out += cc.check_data(data, base)
    if model is not None:
        found, notes = cc.check_model(model, data)
        out += found
    if raw.get("env") and data is not None and data.template != "chat":  # tools are rendered by the chat template
        out.append((("env",), "a tool environment needs the chat template", "set data.template: chat"))
    generation = section("generation", GenerationConfig)
    if generation is not None:
        out += check_generation(generation, train)
        machine = check_generation_machine(generation, training=use != "run")
        if use == "check":  # the recipe is fine; the machine that runs it needs what these notes say
            notes += [f"{'.'.join(loc)}: {what} (an error for `grpokit train` on this machine; fix there: {fix})"
                      for loc, what, fix in machine]
        else:
            out += machine
    if rewards is not None:
        out += cc.check_rewards(rewards, base)
    if train is not None and trl is not None and not any(loc[0] in ("train", "trl") for loc, _, _ in out):
        # The GRPOConfig is built last, from the real sections where they parsed (stand-ins otherwise), so
        # its own refusals are reported with the rest.
        stand_in = Recipe.model_construct(
            model=model or ModelConfig(), data=data or DataConfig(train="-"), train=train, trl=trl,
            rewards=rewards or [], health=HealthConfig(), preflight=PreflightConfig(),
            generation=generation or GenerationConfig(), output_dir="-")
        out += cc.check_grpo_config(stand_in)
    return out, notes

def validate_raw(raw: Any, source: str | None = None, text: str = "", use: Use = "run") -> Recipe:
    """Validate a raw recipe dict; raise GrpokitError listing every problem (`use`: see load_recipe)."""
    where = source or "recipe"
    lines = line_map(text) if text else {}

    def at(loc: tuple) -> str:
        line = None
        for n in range(len(loc), 0, -1):
            if loc[:n] in lines:
                line = lines[loc[:n]]
                break
        field = ".".join(str(x) for x in loc)
        return f"{where}:{line} {field}" if line else f"{where} {field}"

    if not isinstance(raw, dict):
        raise GrpokitError([Problem(where, "the recipe must be a YAML mapping with model/data/rewards/train sections",
                                    "see recipes/ for examples")])
    problems: list[Problem] = []
    broken: set[str] = set()
    recipe = None
    try:
        recipe = Recipe.model_validate({**raw, "source": source})
    except ValidationError as e:
        for err in e.errors():
            loc = tuple(err["loc"])
            broken.add(str(loc[0]))
            msg = err["msg"]
            if err["type"] == "extra_forbidden":
                msg = f"unknown key '{loc[-1]}'"
            elif "input" in err and err["type"] != "missing":
                msg = f"{msg} (got {err['input']!r})"
            problems.append(Problem(at(loc), msg, _fix_for(err, _fields_at(loc))))
    base = Path(source).parent if source else Path.cwd()
    found, notes = _semantic_problems(raw, base, broken, use)
    problems += [Problem(at(loc), msg, fix) for loc, msg, fix in found]
    if problems or recipe is None:
        raise GrpokitError(problems, title=f"{where}: {len(problems)} problem(s) in the recipe")
    recipe.notes = notes
    return recipe


def load_recipe(path: str | Path, overrides: list[str] | None = None, use: Use = "run") -> Recipe:
    """Read, override and validate a recipe file.

    `use` says what this machine is about to do with it, for the checks of the machine rather than the recipe
    (grpokit.vllm_config.check_generation_machine): "run" (eval, preflight, serving: vLLM must work here),
    "train" (also: vLLM training needs CUDA), "check" (`recipe check`: the machine's shortcomings, judged as for
    training, become notes, since a GPU recipe is often checked on a laptop before the GPU job)."""
    path = Path(path)
    text = read_recipe_text(path)
    raw = parse_yaml(text, str(path))
    if raw is None:
        raw = {}
    for o in overrides or []:
        if isinstance(raw, dict):
            apply_override(raw, o)
    return validate_raw(raw, str(path), text, use)
