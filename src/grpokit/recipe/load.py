"""Reading a recipe: the YAML file, `--set` overrides and every check, before any model loads.

    recipe = load_recipe("recipes/smollm2-arithmetic.yaml", ["train.learning_rate=2e-5"])
    recipe = load_run_recipe("runs/smollm2-arithmetic")      # the resolved recipe a run trained with

`load_recipe(path, overrides)` reads the YAML (grpokit.recipe.yaml_io: UTF-8, duplicate keys, `--set`),
applies the overrides and validates everything at once: the schema (grpokit.recipe.schema), then what
training will build (grpokit.recipe.checks: reward factories, model folder; .train_checks: scheduler, GRPOConfig). Every
problem is reported together, each with `file:line field`, what is wrong and the fix (unknown keys get a
"did you mean"), then `GrpokitError` (exit code 2) is raised.
"""
from __future__ import annotations

import difflib
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from grpokit.data.formats import FORMATS
from grpokit.envs import training_tools
from grpokit.errors import GrpokitError, Problem
from grpokit.recipe import checks, data_checks, train_checks
from grpokit.recipe.generation_section import GenerationConfig, check_generation
from grpokit.recipe.health_section import HealthConfig
from grpokit.recipe.machine import check_generation_machine, sampler_machine_notes
from grpokit.recipe.schema import DataConfig, EnvConfig, ModelConfig, PreflightConfig, Recipe, RewardConfig, TrainConfig
from grpokit.recipe.yaml_io import apply_override, line_map, parse_yaml, read_recipe_text
from grpokit.run import CONFIG_FILE, RunDir
from grpokit.run.ownership import refuse_output_dir
from grpokit.run.reads import reading


def _fix_for(err: dict, model_fields: list[str]) -> str:
    kind, loc, ctx = err["type"], err["loc"], err.get("ctx") or {}
    field = ".".join(str(x) for x in loc)
    if kind == "extra_forbidden":
        close = closest_key(str(loc[-1]), model_fields)
        return f"did you mean '{close}'? otherwise remove it" if close else f"remove it; valid keys: {', '.join(model_fields)}"
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
            allowed = _allowed_range(loc)
            return f"set {field} {word} {ctx[bound]}" + (f" (allowed: {allowed})" if allowed else "")
    if kind == "literal_error":
        return f"use one of {ctx.get('expected')}"
    if loc == ("output_dir",):
        return "name a folder for the run, e.g. runs/my-run (an empty one would be the current folder)"
    if loc == ("train", "max_steps") and kind == "value_error":
        return "set train.max_steps to the steps to train (at least 1), or -1 to train for train.num_train_epochs"
    allowed = _allowed_range(loc)
    if allowed and kind == "int_parsing_size":  # 1e+23 for an int: too large to even parse
        return f"give {field} a number from {allowed}"
    if kind.endswith("_type") or kind.endswith("_parsing"):
        return f"give {field} a value of the right type ({err['msg'].lower()})"
    return ""


def closest_key(key: str, fields: list[str]) -> str | None:
    """The field a mistyped or shortened key most likely means: difflib's closest spelling, else the field whose
    words' initials it is (lr -> learning_rate), else the one field with a word it starts (epochs ->
    num_train_epochs, temp -> temperature)."""
    close = difflib.get_close_matches(key, fields, n=1)
    if close:
        return close[0]
    k = key.lower().replace("-", "_")
    initials = [f for f in fields if len(k) > 1 and "".join(w[0] for w in f.split("_") if w) == k]
    if len(initials) == 1:
        return initials[0]
    starts = [f for f in fields if len(k) > 2 and any(w.startswith(k) for w in f.split("_"))]
    return starts[0] if len(starts) == 1 else None


def _field_info(loc: tuple):
    """The pydantic FieldInfo an error location points at (None when it is not a section field)."""
    model: type[BaseModel] | None = Recipe
    info = None
    for part in loc:
        if isinstance(part, int):
            continue
        if model is None or str(part) not in model.model_fields:
            return None
        info = model.model_fields[str(part)]
        model = next((c for a in (info.annotation, *getattr(info.annotation, "__args__", ()))
                      for c in (a, *getattr(a, "__args__", ())) if isinstance(c, type) and issubclass(c, BaseModel)),
                     None)
    return info


def _allowed_range(loc: tuple) -> str:
    """'-1 to 1000000' (or '> 0 and <= 1') from the field's bounds; '' when it has fewer than two."""
    info = _field_info(loc)
    if info is None:
        return ""
    found = {}
    for m in info.metadata:
        for bound in ("ge", "gt", "le", "lt"):
            if getattr(m, bound, None) is not None:
                found[bound] = getattr(m, bound)
    low = ("ge", found["ge"]) if "ge" in found else ("gt", found["gt"]) if "gt" in found else None
    high = ("le", found["le"]) if "le" in found else ("lt", found["lt"]) if "lt" in found else None
    if low is None or high is None:
        return ""
    if low[0] == "ge" and high[0] == "le":
        return f"{low[1]:,} to {high[1]:,}"
    words = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    return f"{words[low[0]]} {low[1]:,} and {words[high[0]]} {high[1]:,}"


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


def _data_formats(data: DataConfig) -> list[tuple[tuple, str, str]]:
    """data.train / data.eval name a format `grpokit data check` reads (grpokit.data.formats), or hf:<id>."""
    out = []
    for key in ("train", "eval"):
        spec = getattr(data, key)
        if spec is None or spec.startswith("hf:"):
            continue
        suffix = Path(spec.removeprefix("builtin:")).suffix.lower()
        if suffix not in FORMATS:
            out.append((("data", key), f"unknown data format {suffix or '(no extension)'!r} (got {spec!r})",
                        f"use a {', '.join(FORMATS)} file or hf:<dataset id> (the formats `grpokit data check` "
                        "reads); rename the file if its extension is wrong"))
    return out


# What the caller is about to do with the recipe on this machine (see load_recipe).
Use = Literal["run", "train", "check", "plan"]


def _tools(raw: dict) -> list | None:
    """The tool schemas a recipe's env: renders into every prompt (grpokit.envs.training_tools); None without one."""
    if not isinstance(raw.get("env"), dict):
        return None
    try:
        return training_tools(SimpleNamespace(env=EnvConfig.model_validate(raw["env"])))
    except (ValidationError, GrpokitError, KeyError, TypeError):
        return None  # the env check says what is wrong with it


def _semantic_problems(raw: dict, base: Path, broken: set[str],
                       use: Use = "run") -> tuple[list[tuple[tuple, str, str]], list[str]]:
    """Build what training will build (grpokit.recipe.checks) from every section that parsed: (problems, notes)."""
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
        out += train_checks.check_trl(trl, list(TrainConfig.model_fields))
    if train is not None:
        out += train_checks.check_train(train, trl or {})
    elif isinstance(raw.get("train"), dict) and isinstance(raw["train"].get("lr_scheduler_type"), str):
        out += train_checks.check_scheduler_name(raw["train"]["lr_scheduler_type"])  # still reported when train is broken
    train_rows = None  # data.train's rows, read as training reads them (check and train only: others read none)
    if data is not None:
        found = data_checks.check_data(data, base, rewards) + _data_formats(data)
        out += found
        if use != "run" and not found:
            found, train_rows = data_checks.check_data_rows(data, base, rewards, train, trl)
            out += found
    if model is not None:
        found, notes = checks.check_model(model, data)
        out += found
    if data is not None:
        found, hub_notes = data_checks.check_hub_data(data)
        out, notes = out + found, notes + hub_notes
    if raw.get("env") and data is not None and data.template != "chat":  # tools are rendered by the chat template
        out.append((("env",), "a tool environment needs the chat template", "set data.template: chat"))
    generation = section("generation", GenerationConfig)
    if generation is not None:
        out += check_generation(generation, train) + checks.check_continuous_config(generation)
        machine = check_generation_machine(generation, training=use != "run")
        if use == "check":  # the recipe is fine; the machine that runs it needs what these notes say
            notes += [f"{'.'.join(loc)}: {what} (an error for `grpokit train` on this machine; fix there: {fix})"
                      for loc, what, fix in machine]
        else:
            out += machine
        notes += sampler_machine_notes(generation)
    if rewards is not None:
        out += checks.check_rewards(rewards, base, data, notes, train_rows)
    if train is not None:
        out += train_checks.check_algorithm(train, rewards, raw.get("env"))
    if use in ("check", "train") and not out:  # what training would drop, counted as training counts it
        found, length_notes = data_checks.check_prompt_lengths(data, model, train, trl, _tools(raw), train_rows)
        out, notes = out + found, notes + length_notes
    if train is not None and trl is not None and not any(loc[0] in ("train", "trl") for loc, _, _ in out):
        # The GRPOConfig is built last, from the real sections where they parsed (stand-ins otherwise), so
        # its own refusals are reported with the rest.
        stand_in = Recipe.model_construct(
            model=model or ModelConfig(), data=data or DataConfig.model_construct(train="-"), train=train, trl=trl,
            rewards=rewards or [], health=HealthConfig(), preflight=PreflightConfig(),
            generation=generation or GenerationConfig(), output_dir="-")
        out += train_checks.check_grpo_config(stand_in)
    return out, notes

def validate_raw(raw: Any, source: str | None = None, text: str = "", use: Use = "run",
                 overridden: dict[tuple, str] | None = None) -> Recipe:
    """Validate a raw recipe dict; raise GrpokitError listing every problem (`use`: see load_recipe).
    `overridden`: key paths a `--set` replaced -> its dotted key, so a problem there names the flag, not the
    file's line that no longer holds the value."""
    where = source or "recipe"
    lines = line_map(text) if text else {}
    overridden = overridden or {}

    def at(loc: tuple) -> str:
        for n in range(len(loc), 0, -1):
            if loc[:n] in overridden:
                field = ".".join(str(x) for x in loc)
                return f"--set {overridden[loc[:n]]}" + (f" ({field})" if n < len(loc) else "")
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
    # A plan reads sizes only: the schema, not what training builds (rewards, data, GRPOConfig: torch, seconds).
    found, notes = _semantic_problems(raw, base, broken, use) if use != "plan" else ([], [])
    problems += [Problem(at(loc), msg, fix) for loc, msg, fix in found]
    if recipe is not None and use == "check" and not problems:  # train's own refusal of the folder, the same call
        problems += _output_dir_problems(recipe, at(("output_dir",)))
    if problems or recipe is None:
        raise GrpokitError(problems, title=f"{where}: {len(problems)} problem(s) in the recipe")
    recipe.notes = notes
    return recipe


def _output_dir_problems(recipe: Recipe, where: str) -> list[Problem]:
    """What `grpokit train` refuses of the recipe's output_dir, with or without --overwrite (the root, home, a git
    work tree, a folder holding the data or the recipe, a non-empty folder that is no grpokit run): the same
    function training calls (grpokit.run.ownership.refuse_output_dir), resolved from here as training resolves it."""
    try:
        refuse_output_dir(Path(recipe.output_dir).expanduser().resolve(), None, keep=recipe.read_paths())
    except GrpokitError as e:
        return [Problem(f"{where} ({p.where})", p.message, p.fix) for p in e.problems]
    return []


def load_recipe(path: str | Path, overrides: list[str] | None = None, use: Use = "run") -> Recipe:
    """Read, override and validate a recipe file.

    `use` says what this machine is about to do with it, for the checks of the machine rather than the recipe
    (grpokit.recipe.machine.check_generation_machine): "run" (eval, preflight, serving: vLLM must work here),
    "train" (also: vLLM training needs CUDA), "check" (`recipe check`: the machine's shortcomings, judged as for
    training, become notes, since a GPU recipe is often checked on a laptop before the GPU job), "plan" (the
    memory plan and dry runs: the schema only, none of the checks that build what training builds)."""
    reading(path)  # an input of this command: no output of it is ever written over the recipe
    return _load_recipe(Path(path), overrides, use)


def _load_recipe(path: Path, overrides: list[str] | None, use: Use) -> Recipe:
    text = read_recipe_text(path)
    raw = parse_yaml(text, str(path))
    if raw is None:
        raw = {}
    overridden: dict[tuple, str] = {}
    for o in overrides or []:
        if isinstance(raw, dict):
            apply_override(raw, o)
            dotted = o.split("=", 1)[0].strip()
            overridden[tuple(int(k) if k.isdigit() else k for k in dotted.split("."))] = dotted
    recipe = validate_raw(raw, str(path), text, use, overridden)
    reading(*(recipe.resolve_data_path(p) for p in (recipe.data.train, recipe.data.eval) if p))  # its data: inputs
    return recipe


def load_run_recipe(run_dir: str | Path | RunDir, overrides: list[str] | None = None) -> Recipe:
    """The recipe a run directory trained with (its config.yaml: absolute data paths, so any directory works);
    `overrides` (`--resume RUN --set train.max_steps=N`) change it as `--set` does a recipe file."""
    run = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
    if not run.is_run():
        raise GrpokitError([Problem(str(run.path), f"not a grpokit run directory (no {CONFIG_FILE})",
                                    "pass the output_dir of an earlier `grpokit train`")])
    return _load_recipe(run.config, overrides, "run")  # the run's own file: --resume records a new end in it
