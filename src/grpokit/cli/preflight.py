"""`grpokit preflight`: sample the initial model on training prompts and recommend settings."""
from __future__ import annotations

from pathlib import Path

from grpokit.cli.output import add_overwrite_option, add_set_option, err, print_notes
from grpokit.errors import GrpokitError, Problem
from grpokit.recipe import load_recipe
from grpokit.run.writer import check_target


def register(sub) -> None:
    p = sub.add_parser("preflight", help="sample the initial model on training prompts and recommend settings")
    p.add_argument("recipe", help="recipe YAML file")
    p.add_argument("--prompts", type=int, default=16, help="training prompts to sample (default 16)")
    p.add_argument("--generations", type=int, help="completions per prompt (default: train.num_generations)")
    p.add_argument("--write-filtered", metavar="OUT.jsonl",
                   help="write only the judged prompts with a reward spread, easy/hard alternating (keep that order "
                   "in training with --set train.shuffle_dataset=false)")
    p.add_argument("--output", default="preflight.json", help="where to write the report (default ./preflight.json)")
    add_overwrite_option(p, "--output and --write-filtered")
    add_set_option(p)
    m = p.add_argument_group("memory plan (no model loaded; see grpokit.preflight.memory)")
    m.add_argument("--memory", action="store_true", help="print the per-GPU memory plan from the model config and exit")
    m.add_argument("--num-processes", type=int, default=1, metavar="N", help="GPUs to plan for (default 1)")
    m.add_argument("--accelerate-config", choices=("ddp", "zero2", "zero3", "fsdp"),
                   help="plan one strategy (default: all of them)")
    m.add_argument("--gpu-memory", type=float, metavar="GIB", help="GPU size for the recommendation "
                   "(default: the smallest of 24/40/80/141 GiB that fits)")
    p.set_defaults(func=cmd_preflight)


def cmd_preflight(args) -> int:
    if args.memory:
        from grpokit.preflight.memory import memory_report, render_memory_plan

        if args.num_processes < 1:
            raise GrpokitError([Problem("--num-processes", "must be >= 1", "e.g. --num-processes 8")])
        # A plan for another machine, from sizes: the schema is checked, not what training builds (rewards, data,
        # GRPOConfig), so it answers in about a second without torch; `grpokit recipe check` runs the rest.
        recipe = load_recipe(args.recipe, args.set, use="plan")
        report = memory_report(recipe, args.num_processes, args.accelerate_config, args.gpu_memory)
        for note in report["notes"]:  # a model not downloaded here: planned from its published sizes
            err.print(f"[yellow]note:[/] {note}", highlight=False)
        print(render_memory_plan(report, recipe))
        return 0
    from grpokit.preflight import preflight_recipe, render_preflight, write_filtered

    if args.prompts < 1 or (args.generations is not None and args.generations < 2):
        raise GrpokitError([Problem("grpokit preflight", "--prompts must be >= 1 and --generations >= 2",
                                    "e.g. --prompts 16 --generations 8")])
    recipe = load_recipe(args.recipe, args.set)
    for out in (args.output, args.write_filtered):  # before the model loads: never a link, the data or the recipe
        if out is not None:
            check_target(out, replace=args.overwrite)
    print_notes(recipe)
    r, rows = preflight_recipe(recipe, prompts=args.prompts, generations=args.generations, out_file=Path(args.output),
                               overwrite=args.overwrite)
    print(render_preflight(r))
    if args.write_filtered:
        n, dropped, unjudged = write_filtered(r, rows, Path(args.write_filtered), args.overwrite)
        print(f"wrote {n} rows to {args.write_filtered} (easy/hard alternating): {dropped} no-signal prompt(s) "
              f"dropped, {unjudged} unjudged row(s) left out (--prompts {len(rows)} judges every row); train on "
              "them in this order with train.shuffle_dataset: false")
    return 0
