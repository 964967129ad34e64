"""`grpokit demo` and `grpokit train`: the training commands."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.markup import escape

from grpokit import DEMO_TIME
from grpokit.cli.output import add_set_option, err, print_notes
from grpokit.demo import DEFAULT_TASK, TASKS, run_demo
from grpokit.distributed import is_rank_zero, shutdown
from grpokit.errors import GrpokitError, Problem
from grpokit.recipe import batch_geometry, load_recipe, load_run_recipe, refuse_vllm_training_here
from grpokit.run import RunDir, describe_lineage


def register(sub) -> None:
    demo = sub.add_parser("demo", help="train the embedded model on the bundled arithmetic task, SFT then GRPO "
                                       f"({DEMO_TIME} on a 2-core CPU, "
                                       "docs/measurements.md 'The demo: an SFT warm start, then GRPO')")
    demo.add_argument("--task", choices=list(TASKS), default=DEFAULT_TASK,
                      help="the task family: " + "; ".join(f"{k}: {t.what}" for k, t in TASKS.items()))
    demo.add_argument("--output-dir", help="run directory (default: the task's, runs/demo for arithmetic; an "
                      "earlier demo there is replaced; any other non-empty folder is refused)")
    add_set_option(demo, "override a demo recipe value, e.g. --set train.max_steps=5")
    demo.add_argument("--resume", action="store_true", help="go on with the default demo (its finished SFT run is "
                      "kept, GRPO continues from its last checkpoint) or a comparison (sft-vs-grpo*, composition) in "
                      "--output-dir that was stopped or killed: its finished trainings and evaluations are kept, the "
                      "rest is done (the same --set as before)")
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
    run_demo(output_dir=args.output_dir, overrides=args.set, task=args.task, resume=args.resume)
    return 0


@dataclass
class TrainRequest:
    """One `grpokit train` command, resolved once: the recipe (a resumed run's own, or the file's with --set and
    --init-from), where the run goes, and the arguments that make `grpokit train` do the same again (each process
    of a launch runs them; a dry run prints them)."""

    recipe: object
    run_dir: str  # --resume RUN_DIR, --output-dir, or the recipe's output_dir, as given
    argv: list[str]
    resume: bool
    lineage: dict | None = None  # --init-from's record (a new run here), or the resumed run's own


def cmd_train(args) -> int:
    from grpokit.training import check_processes

    _refuse_conflicts(args)
    opts = _launch_options(args)  # a bad layout is refused before the recipe loads
    request = _request(args, here=opts is None and not args.dry_run)
    if opts is not None:  # refill keeps whole groups on each process (a dry run says it too)
        g = batch_geometry(request.recipe.train, request.recipe.trl, opts.num_processes)
        check_processes(request.recipe.selection, g.processes, g.per_process, g.group)
    if args.dry_run:
        return _dry_run(args, request, opts)
    if not request.resume and not args.skip_audit:
        # A taken run folder is refused before the audit's seconds to minutes (training refuses it again, locked).
        RunDir(Path(request.run_dir).resolve()).refuse_existing(args.overwrite)
        print_audit_warnings(request.recipe)
    if opts is not None:
        return _launch(request, opts)
    from grpokit.training import train

    finished = False
    try:  # in a launched worker the process group ends here, before the interpreter's teardown
        if request.resume:
            train(request.recipe, run_dir=args.resume, resume=True, init_from=request.lineage)
        else:
            train(request.recipe, run_dir=args.output_dir, overwrite=args.overwrite, init_from=request.lineage)
        finished = True
    finally:
        shutdown(finished)
    return 0


def _refuse_conflicts(args) -> None:
    if args.init_from and args.resume:
        raise GrpokitError([Problem("--init-from", "a resumed run continues from its own checkpoint",
                                    "drop --init-from (the run keeps the lineage it started with)")])
    if args.resume and args.recipe:
        raise GrpokitError([Problem("grpokit train", "give either RECIPE or --resume RUN_DIR, not both",
                                    "--resume reads the recipe saved in the run directory")])


def _launch_options(args):
    """The layout of `--num-processes N` (checked here, before anything loads), or None: training runs in this
    process."""
    if args.num_processes is None:
        return None
    import torch

    from grpokit.training import LaunchOptions, check_options

    opts = LaunchOptions(args.num_processes, args.accelerate_config, args.num_machines, args.machine_rank,
                         args.main_process_ip, args.main_process_port)
    check_options(opts, need_modules=not args.dry_run, cuda=torch.cuda.is_available())
    return opts


def _request(args, here: bool) -> TrainRequest:
    """The command's recipe and run, read once. `here`: this process trains (not a launch, not a dry run), so
    --init-from is applied here; a launch hands it on to each process."""
    if args.resume:
        sets = _resume_overrides(args.set)
        recipe = load_run_recipe(args.resume, sets)  # a bad run directory fails here, not in N processes
        if args.num_processes is not None and not args.dry_run:
            refuse_vllm_training_here(recipe.generation, str(RunDir(args.resume).config))
        return TrainRequest(recipe, args.resume, ["--resume", args.resume, *_sets(sets)], True,
                            _earlier_lineage(args.resume) if here else None)
    if not args.recipe:
        raise GrpokitError([Problem("grpokit train", "no recipe given", "grpokit train RECIPE.yaml (see recipes/)")])
    # A dry run only prints (often on another machine than the one that runs it); training refuses here what this
    # machine cannot run (e.g. vLLM training on a CPU).
    recipe = load_recipe(args.recipe, args.set, use="check" if args.dry_run else "train")
    main_process = is_rank_zero()  # under `--num-processes N` every rank runs this: print once, not N times
    if main_process:
        print_notes(recipe)  # what validation could not check (a hub id while offline)
    argv = [args.recipe, *_sets(args.set), *(["--output-dir", args.output_dir] if args.output_dir else []),
            *(["--overwrite"] if args.overwrite else []), *(["--init-from", args.init_from] if args.init_from else [])]
    lineage = None
    if here and args.init_from:
        from grpokit.training import apply_init_from

        recipe, lineage = apply_init_from(recipe, args.init_from, explicit=args.set)  # --set wins over continuing
        if main_process:
            print(describe_lineage(lineage))
    return TrainRequest(recipe, args.output_dir or recipe.output_dir, argv, False, lineage)


def _sets(sets: list[str] | None) -> list[str]:
    return [x for s in sets or [] for x in ("--set", s)]


def _launch(request: TrainRequest, opts) -> int:
    """Run `grpokit train` in every process through accelerate (validated here once: the processes skip the
    audit), and say how to continue when a signal stopped it."""
    import torch

    from grpokit.training import accelerate_command, mixed_precision_of, run_launch

    precision = mixed_precision_of(request.recipe.model.dtype) if torch.cuda.is_available() else "no"
    code, signalled = run_launch(accelerate_command([*request.argv, "--skip-audit"], opts, mixed_precision=precision))
    run_dir = Path(request.run_dir)
    status = str(RunDir(run_dir).read_status().get("status", ""))  # crash-tolerant: a cut run.json reads as {}
    if code and signalled and status.startswith("interrupted"):
        print(f"{signalled}: every process saved a checkpoint and stopped (the launcher's SignalException above "
              f"is how torchrun ends); continue with: grpokit train --resume {run_dir}")
        return 0
    return code


def _dry_run(args, request: TrainRequest, opts) -> int:
    """`grpokit train ... --dry-run`: the settings training would use (stderr) and the command that runs it
    (stdout), with the checks a launch makes; no model is loaded, nothing is written. The command is for the
    machines the recipe is for (its precision on GPUs), not for this one."""
    from grpokit.training.launch import accelerate_command, format_command, missing_here, resolved_settings

    n = 1 if opts is None else opts.num_processes
    for line in resolved_settings(request.recipe, n, None if opts is None else opts.accelerate_config):
        err.print(line, markup=False, highlight=False)
    if opts is None:
        err.print(f"  output      {request.run_dir}", markup=False, highlight=False)
        skip = ["--skip-audit"] if args.skip_audit and not request.resume else []
        print(format_command(["grpokit", "train", *request.argv, *skip]))
        return 0
    from grpokit.training import mixed_precision_of

    print(format_command(accelerate_command([*request.argv, "--skip-audit"], opts,
                                            mixed_precision=mixed_precision_of(request.recipe.model.dtype))))
    for line in missing_here(opts):
        err.print(f"[yellow]note:[/] {line}")
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
    return RunDir(run_dir).read_status().get("init_from")


def print_audit_warnings(recipe) -> None:
    """The findings `grpokit rewards audit` prints (reward errors with the first traceback, the reward paying for
    each trick and the fix), before training starts."""
    from grpokit.audit import audit_warnings
    from grpokit.console import console

    for w in audit_warnings(recipe, log=console.print):  # each finding starts with "reward audit:"
        console.print(f"[yellow]{escape(w)}[/]")  # a traceback's `d["key"]` is text, not markup
