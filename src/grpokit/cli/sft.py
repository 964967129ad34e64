"""`grpokit sft`: supervised fine-tuning on a recipe's rows, the control run (and the polish) for GRPO."""
from __future__ import annotations

from grpokit.cli.output import add_set_option
from grpokit.recipe import load_recipe
from grpokit.run import describe_lineage


def register(sub) -> None:
    p = sub.add_parser("sft", help="supervised fine-tuning on the recipe's reference solutions (TRL SFTTrainer), "
                                   "same template as GRPO")
    p.add_argument("recipe", help="recipe YAML file (its data, template, model and train settings)")
    add_set_option(p)
    p.add_argument("--output-dir", help="run directory (default: the recipe's output_dir)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing run directory")
    p.add_argument("--init-from", metavar="RUN_DIR|EXPORT_DIR",
                   help="start from an earlier run's best (else last) checkpoint or an exported model folder")
    p.set_defaults(func=cmd_sft)


def cmd_sft(args) -> int:
    from grpokit.console import console
    from grpokit.training import apply_init_from, train_sft

    recipe, lineage = apply_init_from(load_recipe(args.recipe, args.set), args.init_from, continuing=False)
    if lineage:
        console.print(describe_lineage(lineage))
    train_sft(recipe, run_dir=args.output_dir, overwrite=args.overwrite, init_from=lineage,
              log=lambda m: console.print(m, markup=False))
    return 0
