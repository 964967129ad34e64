"""`grpokit demo` and `grpokit train`: the training commands."""
from __future__ import annotations

from pathlib import Path

from grpokit.cli.output import add_set_option, err, print_notes
from grpokit.errors import GrpokitError, Problem


def register(sub) -> None:
    from grpokit import DEMO_TIME
    from grpokit.demo import DEFAULT_TASK, TASKS

    demo = sub.add_parser("demo", help="train the embedded model on the bundled arithmetic task "
                                       f"({DEMO_TIME} on a 2-core CPU, docs/measurements.md)")
    demo.add_argument("--task", choices=list(TASKS), default=DEFAULT_TASK,
                      help="the task family: " + "; ".join(f"{k}: {t.what}" for k, t in TASKS.items()))
    demo.add_argument("--output-dir", help="run directory (default: the task's, runs/demo for arithmetic; an "
                      "earlier demo there is replaced; any other non-empty folder is refused)")
    add_set_option(demo, "override a demo recipe value, e.g. --set train.max_steps=5")
    demo.set_defaults(func=cmd_demo)

    tr = sub.add_parser("train", help="train a recipe, or --resume a run")
    tr.add_argument("recipe", nargs="?", help="recipe YAML file")
    add_set_option(tr)
    tr.add_argument("--output-dir", help="run directory (default: the recipe's output_dir)")
    tr.add_argument("--overwrite", action="store_true", help="replace an existing run directory")
    tr.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its latest complete checkpoint (a "
                    "finished run: raise its end with --set train.max_steps=N)")
    tr.add_argument("--init-from", metavar="RUN_DIR|EXPORT_DIR",
                    help="start from an earlier run's best (else last) checkpoint or an exported model folder")
    tr.add_argument("--skip-audit", action="store_true", help="do not run the reward audit before training")
    add_launch_options(tr)
    tr.set_defaults(func=cmd_train)


def add_launch_options(tr) -> None:
    g = tr.add_argument_group("several processes (runs `accelerate launch`; see grpokit.training.launch)")
    g.add_argument("--num-processes", type=int, metavar="N",
                   help="total processes (GPUs) over all machines; without it grpokit trains in this process")
    g.add_argument("--accelerate-config", default="ddp", metavar="ddp|zero2|zero3|fsdp|FILE",
                   help="a shipped accelerate config or your own YAML file (default ddp)")
    g.add_argument("--num-machines", type=int, default=1, metavar="M", help="machines taking part (default 1)")
    g.add_argument("--machine-rank", type=int, default=0, metavar="R", help="this machine's rank, 0 = main")
    g.add_argument("--main-process-ip", metavar="IP", help="address of machine 0 (needed with --num-machines > 1)")
    g.add_argument("--main-process-port", type=int, metavar="PORT", help="port on machine 0 (default: accelerate's)")
    g.add_argument("--dry-run", action="store_true", help="print the settings training would use (TRL's "
                   "GRPOConfig, the memory plan) and the command that runs it, then exit; no model is loaded")


def cmd_demo(args) -> int:
    from grpokit.demo import run_demo

    run_demo(output_dir=args.output_dir, overrides=args.set, task=args.task)
    return 0


def cmd_train(args) -> int:
    from grpokit.distributed import is_rank_zero
    from grpokit.recipe import load_recipe, load_run_recipe
    from grpokit.training import train

    if args.init_from and args.resume:
        raise GrpokitError([Problem("--init-from", "a resumed run continues from its own checkpoint",
                                    "drop --init-from (the run keeps the lineage it started with)")])
    if args.resume and args.recipe:
        raise GrpokitError([Problem("grpokit train", "give either RECIPE or --resume RUN_DIR, not both",
                                    "--resume reads the recipe saved in the run directory")])
    if args.num_processes is not None or args.dry_run:
        return _launch(args)
    if args.resume:
        recipe = load_run_recipe(args.resume, _resume_overrides(args.set))
        train(recipe, run_dir=args.resume, resume=True, init_from=_earlier_lineage(args.resume))
        return 0
    if not args.recipe:
        raise GrpokitError([Problem("grpokit train", "no recipe given", "grpokit train RECIPE.yaml (see recipes/)")])
    recipe = load_recipe(args.recipe, args.set, use="train")  # e.g. vLLM training on a CPU: refused here
    main_process = is_rank_zero()  # under `--num-processes N` every rank runs this: print once, not N times
    for note in recipe.notes if main_process else []:  # what validation could not check (a hub id while offline)
        err.print(f"[yellow]note:[/] {note}")
    lineage = None
    if args.init_from:
        from grpokit.run import describe_lineage
        from grpokit.training import apply_init_from

        recipe, lineage = apply_init_from(recipe, args.init_from, explicit=args.set)  # --set wins over continuing
        if main_process:
            print(describe_lineage(lineage))
    if not args.skip_audit:
        from grpokit.run import RunDir

        # A taken run folder is refused before the audit's seconds to minutes (training refuses it again, locked).
        RunDir(Path(args.output_dir or recipe.output_dir).resolve()).refuse_existing(args.overwrite)
        _audit_warnings(recipe)
    train(recipe, run_dir=args.output_dir, overwrite=args.overwrite, init_from=lineage)
    return 0


def _launch(args) -> int:
    """Validate here once, then run `grpokit train` in every process through accelerate."""
    from grpokit.recipe import load_recipe, refuse_vllm_training_here
    from grpokit.training import (LaunchOptions, accelerate_command, check_options, format_command, missing_here,
                                  mixed_precision_of, run_launch)

    if args.num_processes is None:  # a dry run of one process (training itself runs in this process)
        return _dry_run_here(args)
    opts = LaunchOptions(args.num_processes, args.accelerate_config, args.num_machines, args.machine_rank,
                         args.main_process_ip, args.main_process_port)
    import torch

    cuda = torch.cuda.is_available()
    check_options(opts, need_modules=not args.dry_run, cuda=cuda)
    if args.resume:
        from grpokit.recipe import load_run_recipe

        sets = _resume_overrides(args.set)
        recipe = load_run_recipe(args.resume, sets)  # a bad run directory fails here, not in N processes
        argv = ["--resume", args.resume, *[x for s in sets for x in ("--set", s)]]
        if not args.dry_run:
            from grpokit.run import RunDir

            refuse_vllm_training_here(recipe.generation, str(RunDir(args.resume).config))
    elif args.recipe:
        # A dry run only prints the command (often on another machine than the one that runs it).
        recipe = load_recipe(args.recipe, args.set, use="check" if args.dry_run else "train")
        print_notes(recipe)
        if not args.skip_audit and not args.dry_run:
            from grpokit.run import RunDir

            RunDir(Path(args.output_dir or recipe.output_dir).resolve()).refuse_existing(args.overwrite)
            _audit_warnings(recipe)
        argv = [args.recipe, *[x for s in args.set or [] for x in ("--set", s)]]
        argv += (["--output-dir", args.output_dir] if args.output_dir else []) + (["--overwrite"] if args.overwrite else [])
        argv += ["--init-from", args.init_from] if args.init_from else []
    else:
        raise GrpokitError([Problem("grpokit train", "no recipe given", "grpokit train RECIPE.yaml (see recipes/)")])
    from grpokit.training import check_processes

    t, trl = recipe.train, recipe.trl  # each process's completions per step, as TRL will split them
    rows = trl["generation_batch_size"] // opts.num_processes if trl.get("generation_batch_size") else \
        t.per_device_train_batch_size * trl.get("steps_per_generation", t.gradient_accumulation_steps)
    check_processes(recipe.selection, opts.num_processes, rows, t.num_generations)  # a dry run says it too
    # A dry run prints the command for the machines the recipe is for (its precision on GPUs), not for this one.
    precision = mixed_precision_of(recipe.model.dtype) if (cuda or args.dry_run) else "no"
    cmd = accelerate_command([*argv, "--skip-audit"], opts, mixed_precision=precision)
    if args.dry_run:
        from grpokit.training.launch import resolved_settings

        for line in resolved_settings(recipe, opts.num_processes, opts.accelerate_config):  # stdout: the command
            err.print(line, markup=False, highlight=False)
        print(format_command(cmd))
        for line in missing_here(opts):
            err.print(f"[yellow]note:[/] {line}")
        return 0
    code, signalled = run_launch(cmd)
    run_dir = Path(args.resume or args.output_dir or recipe.output_dir)
    from grpokit.run import RunDir

    status = str(RunDir(run_dir).read_status().get("status", ""))  # crash-tolerant: a cut run.json reads as {}
    if code and signalled and status.startswith("interrupted"):
        print(f"{signalled}: every process saved a checkpoint and stopped (the launcher's SignalException above "
              f"is how torchrun ends); continue with: grpokit train --resume {run_dir}")
        return 0
    return code


def _dry_run_here(args) -> int:
    """`grpokit train RECIPE --dry-run` on one process: the settings training would use (stderr) and the command
    that runs it (stdout), with the checks a launch makes; no model is loaded, nothing is written."""
    from grpokit.recipe import load_recipe, load_run_recipe
    from grpokit.training.launch import format_command, resolved_settings
    from grpokit.training.selection import check_processes

    if args.resume:
        recipe = load_run_recipe(args.resume, _resume_overrides(args.set))
        argv = ["--resume", args.resume, *[x for s in args.set or [] for x in ("--set", s)]]
    elif args.recipe:
        recipe = load_recipe(args.recipe, args.set, use="check")  # often printed on another machine than the GPUs'
        print_notes(recipe)
        argv = [args.recipe, *[x for s in args.set or [] for x in ("--set", s)]]
        argv += (["--output-dir", args.output_dir] if args.output_dir else []) + (["--overwrite"] if args.overwrite else [])
        argv += ["--init-from", args.init_from] if args.init_from else []
        argv += ["--skip-audit"] if args.skip_audit else []
    else:
        raise GrpokitError([Problem("grpokit train", "no recipe given", "grpokit train RECIPE.yaml (see recipes/)")])
    t = recipe.train
    check_processes(recipe.selection, 1, t.per_device_train_batch_size * t.gradient_accumulation_steps, t.num_generations)
    for line in resolved_settings(recipe, 1):
        err.print(line, markup=False, highlight=False)
    err.print(f"  output      {args.resume or args.output_dir or recipe.output_dir}", markup=False, highlight=False)
    print(format_command(["grpokit", "train", *argv]))
    return 0


# What `--resume RUN --set` may change: a resumed run keeps the recipe it trained with, except how long it trains.
RESUME_SETTABLE = ("train.max_steps",)


def _resume_overrides(sets: list[str] | None) -> list[str]:
    for s in sets or []:
        if s.split("=", 1)[0].strip() not in RESUME_SETTABLE:
            raise GrpokitError([Problem(f"--set {s}", "a resumed run keeps the recipe it trained with; only "
                                        f"{', '.join(RESUME_SETTABLE)} can change (to train longer)",
                                        "drop this --set, or start a new run: grpokit train RECIPE --set ...")])
    return list(sets or [])


def _earlier_lineage(run_dir) -> dict | None:
    """The lineage a run started with (run.json's init_from), kept when it is resumed."""
    from grpokit.run import RunDir

    return RunDir(run_dir).read_status().get("init_from")


def _audit_warnings(recipe) -> None:
    """The findings `grpokit rewards audit` prints (reward errors with the first traceback, the reward paying for
    each trick and the fix), before training starts."""
    from rich.markup import escape

    from grpokit.audit import audit_warnings
    from grpokit.console import console

    for w in audit_warnings(recipe, log=console.print):  # each finding starts with "reward audit:"
        console.print(f"[yellow]{escape(w)}[/]")  # a traceback's `d["key"]` is text, not markup
