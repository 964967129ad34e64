"""`--init-from`: start training from an earlier run's best checkpoint or an exported model folder.

    grpokit train recipes/smollm2-arithmetic.yaml --init-from runs/smollm2-arithmetic     # another GRPO round
    grpokit sft recipes/smollm2-arithmetic-sft.yaml --init-from runs/smollm2-arithmetic   # a little SFT after GRPO
    grpokit train RECIPE --init-from runs/smollm2-arithmetic/export/checkpoint-20          # from the deployed model

A run directory gives its best checkpoint (`eval/best.json` from `grpokit
eval`), else its last complete one; an exported folder (config.json and
weights) is used as it is. The recipe's `model.name` is replaced by that
folder before anything loads, and the lineage `init_from: {path, step, kind,
run}` is written to run.json (and shown by `grpokit report`), so a chain of
rounds can be traced back. A LoRA checkpoint holds an adapter, not a model:
export it first (`grpokit export RUN_DIR`), which merges it.

A warm start is worth what its prompts share with the next run's: an SFT run
on another system prompt, template or tool environment taught the model a
context GRPO never shows it. The settings that make the prompt (PROMPT_FIELDS)
of the earlier run are compared with the recipe's; each difference goes into
the lineage (`prompt_differs`) and is said wherever the lineage is shown.

Settings fit for continuing (`grpokit train --init-from`, not `sft`): a recipe's
learning rate is chosen for the model it names, usually one that has not yet
learned the task; a trained model has something to lose. GRPO from an SFT
model at the demo recipe's 2e-5 halved its held-out accuracy in 10 steps while
3e-6 kept it (docs/measurements.md "GRPO from an SFT model"), so a recipe
learning rate above CONTINUING_LEARNING_RATE is lowered to it, unless `--set
train.learning_rate=...` names one explicitly (or the recipe names the trained
model itself as model.name: then there is no --init-from to react to). The
change goes into the lineage (`continuing`) and the run's first lines
(`continuing_notes`). Beta, the schedule and the rest stay the recipe's: the
measured fall is the learning rate's, and a rollback (the held-out probe's
`probe_drop`) raises beta if the run still falls.
"""
from __future__ import annotations

from pathlib import Path

from grpokit.errors import GrpokitError, Problem
from grpokit.recipe import load_run_recipe
from grpokit.run import RunDir


def resolve_init_from(spec: str) -> tuple[str, dict]:
    """(model folder to load, lineage record) for a run directory or a model folder."""
    path = Path(spec).expanduser().resolve()
    if (path / "config.yaml").is_file():  # a grpokit run directory
        run = RunDir(path)
        how = "best" if run.read_best() is not None else "last"
        ck = run.resolve_checkpoint("auto")
        if ck is None:  # step 0 was the best: the run's own starting model
            base = load_run_recipe(run).model.name
            return base, {"path": base, "step": 0, "kind": "run-base", "run": str(path), "chosen": how}
        if (ck / "adapter_config.json").is_file():
            raise GrpokitError([Problem(f"--init-from {spec}", f"{ck.name} is a LoRA adapter, not a whole model",
                                        f"merge it first: grpokit export {spec} --checkpoint {how}, then "
                                        "--init-from the exported folder")])
        return str(ck), {"path": str(ck), "step": int(ck.name.split("-")[-1]), "kind": f"run-{how}-checkpoint",
                         "run": str(path), "chosen": how}
    if (path / "config.json").is_file():
        if (path / "adapter_config.json").is_file():
            raise GrpokitError([Problem(f"--init-from {spec}", "this folder holds a LoRA adapter, not a whole model",
                                        "export the run with `grpokit export RUN_DIR` and pass the exported folder")])
        return str(path), {"path": str(path), "step": None, "kind": "model-folder", "run": None}
    raise GrpokitError([Problem(f"--init-from {spec}", "neither a grpokit run directory (config.yaml) nor a model "
                                "folder (config.json)", "pass the output_dir of an earlier run, or a folder from "
                                "`grpokit export`")])


# (section, field) of the recipe settings that make what the model reads: its prompt, its tools.
PROMPT_FIELDS = (("data", "template"), ("data", "system_prompt"), ("model", "enable_thinking"), ("env", "name"),
                 ("env", "params"))


def _setting(recipe, section: str, name: str):
    part = getattr(recipe, section)
    return None if part is None else getattr(part, name)


def prompt_drift(earlier, recipe) -> list[str]:
    """`section.field` of each prompt setting (PROMPT_FIELDS) that differs between two recipes."""
    return [f"{section}.{name}" for section, name in PROMPT_FIELDS
            if _setting(earlier, section, name) != _setting(recipe, section, name)]


# The most a GRPO run continuing from a trained model steps by: the Qwen3-0.6B-Base article's starting value, inside
# its range of 1e-6 to 5e-6 (above 5e-6 its KL ran away); the Qwen3-4B/14B article starts at 2e-6 and saw output
# quality waver at 5e-6. Measured on an SFT model: docs/measurements.md "GRPO from an SFT model".
CONTINUING_LEARNING_RATE = 3e-6


def apply_init_from(recipe, spec: str | None, explicit: list[str] | None = None, continuing: bool = True):
    """(recipe with model.name replaced, lineage) — unchanged recipe and None without --init-from.

    `continuing` (GRPO; SFT passes False): the settings fit for continuing from a trained model (the module
    docstring) replace the recipe's, except those `explicit` (the command's `--set key=value` list) names."""
    if not spec:
        return recipe, None
    model_dir, lineage = resolve_init_from(spec)
    if lineage.get("run"):
        lineage["prompt_differs"] = prompt_drift(load_run_recipe(RunDir(lineage["run"])), recipe)
    lineage["base_model"] = recipe.model.name  # what the recipe named; the run starts from model_dir instead
    recipe = recipe.model_copy(update={"model": recipe.model.model_copy(update={"name": model_dir})})
    if continuing and lineage["kind"] != "run-base":  # run-base: the earlier run's own untrained start
        recipe, lineage["continuing"] = continuing_settings(recipe, explicit or [])
    return recipe, lineage


def continuing_settings(recipe, explicit: list[str]) -> tuple[object, dict]:
    """(recipe, {"train.<field>": [recipe's value, value used]}) with the settings fit for continuing applied where
    the recipe asks for more and no `--set` named the field."""
    named = {s.split("=", 1)[0].strip() for s in explicit}
    changed = {}
    lr = recipe.train.learning_rate
    if lr > CONTINUING_LEARNING_RATE and "train.learning_rate" not in named:
        changed["train.learning_rate"] = [lr, CONTINUING_LEARNING_RATE]
        recipe = recipe.model_copy(update={"train": recipe.train.model_copy(
            update={"learning_rate": CONTINUING_LEARNING_RATE})})
    return recipe, changed


def continuing_notes(lineage: dict | None) -> list[str]:
    """The run's first lines about the settings --init-from changed (none: nothing changed)."""
    changed = (lineage or {}).get("continuing") or {}
    if not isinstance(changed, dict) or not changed:
        return []
    what = ", ".join(f"{k} {was:g} -> {now:g}" for k, (was, now) in changed.items())
    keep = " ".join(f"--set {k}={was:g}" for k, (was, now) in changed.items())
    return [f"continuing from a trained model (--init-from): {what}, a step fit for a model that has something to "
            f"lose (the recipe's is for the model it names); to keep the recipe's: {keep}"]
