"""`grpokit recipe check`: validate a recipe before any model loads."""
from __future__ import annotations

import yaml

from grpokit.cli.output import add_set_option, err
from grpokit.recipe import load_recipe
from grpokit.rewards import BUILTIN, DEFAULT_ROLE, reward_title


def register(sub) -> None:
    rc = sub.add_parser("recipe", help="recipe tools").add_subparsers(dest="recipe_command", required=True,
                                                                       metavar="ACTION")
    chk = rc.add_parser("check", help="validate a recipe and print it resolved")
    chk.add_argument("recipe", help="recipe YAML file")
    add_set_option(chk, "override a recipe value (repeatable) before checking it")
    chk.set_defaults(func=cmd_recipe_check)


def cmd_recipe_check(args) -> int:
    # use="check": what this machine lacks (vLLM, CUDA) is a note, not a failure: a GPU recipe is often checked
    # on a laptop before the GPU job. `grpokit train` refuses the same findings before any model loads.
    recipe = load_recipe(args.recipe, args.set, use="check")
    print(_resolved_yaml(recipe), end="")
    for note in recipe.notes:  # what validation could not check here (a hub id while offline, vLLM/CUDA missing)
        err.print(f"[yellow]note:[/] {note}")
    err.print(f"rewards: {describe_rewards(recipe.rewards)}", markup=False)
    err.print(f"[green]{args.recipe}: valid[/]")
    return 0


def _resolved_yaml(recipe) -> str:
    """The recipe resolved, as YAML; a reward entry shows the keys it uses (no `name: null` beside a `path`)."""
    data = recipe.model_dump(mode="json")
    data["rewards"] = [{k: v for k, v in r.items() if v is not None} for r in data.get("rewards", [])]
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def describe_rewards(rewards) -> str:
    """'my_rewards:score (own, correctness) x1.0, format (format) x0.2': each reward by module and function."""
    parts = []
    for r in rewards:
        builtin = BUILTIN.get(r.name) if r.path is None else None
        role = builtin.role if builtin else f"own, {r.role or DEFAULT_ROLE}"
        parts.append(f"{reward_title(r)} ({role}) x{r.weight:g}")
    return ", ".join(parts)
