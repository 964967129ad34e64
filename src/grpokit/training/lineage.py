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
"""
from __future__ import annotations

from pathlib import Path

from grpokit.errors import GrpokitError, Problem
from grpokit.recipe import load_run_recipe


def resolve_init_from(spec: str) -> tuple[str, dict]:
    """(model folder to load, lineage record) for a run directory or a model folder."""
    path = Path(spec).expanduser().resolve()
    if (path / "config.yaml").is_file():  # a grpokit run directory
        from grpokit.run import RunDir

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


def apply_init_from(recipe, spec: str | None):
    """(recipe with model.name replaced, lineage) — unchanged recipe and None without --init-from."""
    if not spec:
        return recipe, None
    model_dir, lineage = resolve_init_from(spec)
    if lineage.get("run"):
        from grpokit.run import RunDir

        lineage["prompt_differs"] = prompt_drift(load_run_recipe(RunDir(lineage["run"])), recipe)
    lineage["base_model"] = recipe.model.name  # what the recipe named; the run starts from model_dir instead
    return recipe.model_copy(update={"model": recipe.model.model_copy(update={"name": model_dir})}), lineage
