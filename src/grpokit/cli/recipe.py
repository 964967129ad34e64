"""`grpokit recipe check`: validate a recipe before any model loads."""
from __future__ import annotations

from grpokit.cli.output import add_set_option, err


def register(sub) -> None:
    rc = sub.add_parser("recipe", help="recipe tools").add_subparsers(dest="recipe_command", required=True,
                                                                       metavar="ACTION")
    chk = rc.add_parser("check", help="validate a recipe and print it resolved")
    chk.add_argument("recipe", help="recipe YAML file")
    add_set_option(chk, "override a recipe value (repeatable) before checking it")
    chk.set_defaults(func=cmd_recipe_check)


def cmd_recipe_check(args) -> int:
    from grpokit.recipe import load_recipe

    # use="check": what this machine lacks (vLLM, CUDA) is a note, not a failure: a GPU recipe is often checked
    # on a laptop before the GPU job. `grpokit train` refuses the same findings before any model loads.
    recipe = load_recipe(args.recipe, args.set, use="check")
    print(recipe.to_yaml(), end="")
    for note in recipe.notes:  # what validation could not check here (a hub id while offline, vLLM/CUDA missing)
        err.print(f"[yellow]note:[/] {note}")
    err.print(f"[green]{args.recipe}: valid[/]")
    return 0
