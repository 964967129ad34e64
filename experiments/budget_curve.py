"""The budget curve on countdown: GRPO against online rejection-sampling fine-tuning (RFT) from the same SFT model, at
equal completions, two seeds, every model on the same held-out rows with the exact paired test.

    python experiments/budget_curve.py --out experiments/runs/curve                       # 10^3 completions, seeds 0 1
    python experiments/budget_curve.py --out experiments/runs/curve --completions 10000   # the next point, same start

Stages, each a grpokit command on the shipped countdown recipes (one process each, so a stage's memory goes with it):

  sft            grpokit sft recipes/smollm2-countdown-sft.yaml --set train.max_steps=SFT_STEPS   (the start)
  grpo-N-sS      grpokit train recipes/smollm2-countdown.yaml --init-from sft --set train.seed=S
                 --set train.max_steps=ceil(N / 16) --set selection.refill=false
  rft-N-sS       the same with --set train.algorithm=rft (grpokit.training.online_rft: the SFT loss on the samples
                 the countdown reward gives full marks, the rest dropped)
  scores         each model greedy on the first ROWS held-out rows (grpokit.evaluation.runs.evaluate_steps, what
                 `grpokit eval` runs) and, unless --no-variants, on the family's rewritten and harder copies

Refill is off in both arms so that a step is exactly the recipe's per_device_train_batch_size x
gradient_accumulation_steps completions (16 for countdown: 2 prompts x 8): N completions are ceil(N / 16) optimizer
steps whatever the algorithm. Everything else is the recipe as shipped (selection, skipping of tied groups, the
health monitor and its rollbacks, the held-out probe), and `--init-from` gives both arms the learning rate it gives
a trained model. `--set` overrides every stage (tests/test_experiments.py runs the curve on a tiny model). The start is scored at the checkpoint `--init-from` continues (the SFT run's best, else
its last), each arm at its last checkpoint.

Output: each stage's run folder under --out, and `curve.json` there (one record per model: completions, seed,
minutes, held-out solve rate with its per-row scores, the copies' solve rates, the paired differences) written after
every stage; a stage whose record is there is not run again, and a run folder holding a completed run is scored
without training again, so a stopped curve resumes by running the same command. The lines it
prints say, for each seed, each arm minus the start and GRPO minus online RFT, with the exact sign test on the
rows where the two models disagree (grpokit.evaluation.paired).

What it leaves out (the issue's item 3 in full): SFT continued for the same minutes, GRPO from the base model
(which solves no countdown row, so its groups tie), sampled pass@1 / pass@8 and retention, and the 10^5 point at the
large step.

Disk: each arm keeps the recipe's checkpoints (countdown: up to 7 of about 1.6 GB, model and optimizer), and
`grpokit train` refuses to start where they would not fit; `--set train.save_total_limit=2` keeps fewer (and so
fewer weights for a health rollback to return to). Minutes are wall time of each command on whatever else the
machine ran: name the host and say whether it was quiet before quoting them.
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

from grpokit.evaluation.paired import paired
from grpokit.run.files import read_json, write_file

ROOT = Path(__file__).resolve().parents[1]
SFT_RECIPE = ROOT / "recipes" / "smollm2-countdown-sft.yaml"
RL_RECIPE = ROOT / "recipes" / "smollm2-countdown.yaml"
ARMS = ("grpo", "rft")
CURVE = "curve.json"


def grpokit(*args: str) -> float:
    """Run one grpokit command (its output shown as it goes); its wall seconds. A failed command stops the curve
    with the command's own message above and one line on how to go on (the finished stages are kept)."""
    t0 = time.time()
    done = subprocess.run([sys.executable, "-m", "grpokit", *args])
    if done.returncode != 0:
        sys.exit(f"budget_curve: `grpokit {args[0]}` stopped (exit {done.returncode}; its message is above). Mend what "
                 "it says, then run the same command again: the stages already scored are kept in curve.json.")
    return time.time() - t0


def scores_of(run_dir: Path, rows: int, variants: bool, model_dir: str | None = None) -> dict:
    """Evaluate greedily the run's last checkpoint (or `model_dir`: what `--init-from` continues) on the first
    `rows` held-out rows, and with `variants` on the family's rewritten and harder copies of them: the held-out
    solve rate, its per-row scores, each copy's solve rate."""
    from grpokit.evaluation.runs import EvalSets, eval_sets, evaluate_steps
    from grpokit.recipe import load_run_recipe
    from grpokit.run import RunDir

    run = RunDir(run_dir)
    recipe = load_run_recipe(run)
    steps = run.by_step()
    path = Path(model_dir) if model_dir else steps[max(steps)]
    sets = eval_sets(recipe, None, rows)
    sets = EvalSets(sets.name, sets.heldout, sets.variants if variants else {}, None, sets.what)
    entry = evaluate_steps(recipe, sets, {1: path})[0]
    return {"model": str(path), "solved": entry["heldout"]["accuracy"], "scores": entry["heldout"]["scores"],
            **{f"solved_{kind}": entry[kind]["accuracy"] for kind in sets.variants}}


def finished(run_dir: Path) -> bool:
    from grpokit.run import RunDir

    run = RunDir(run_dir)
    return run.run_json.is_file() and run.read_status().get("status") == "completed"


def stage(curve: dict, out: Path, name: str, command: list[str], overrides: list[str], start: bool = False,
          **record) -> dict:
    """`name`'s record, from curve.json, or by running `command` with the curve's overrides (unless its run folder
    holds a completed run already: a curve stopped during an evaluation does not train again) and evaluating."""
    if name in curve["models"]:
        return curve["models"][name]
    run_dir = out / name
    seconds = None
    if not finished(run_dir):
        sets = [a for o in overrides for a in ("--set", o)]
        seconds = grpokit(*command, *sets, "--output-dir", str(run_dir), "--overwrite")
    t0 = time.time()
    model_dir = None
    if start:  # the checkpoint --init-from continues (the run's best, else its last)
        from grpokit.training.lineage import resolve_init_from

        model_dir = resolve_init_from(str(run_dir))[0]
    settings = curve["settings"]
    got = scores_of(run_dir, settings["eval_rows"], settings["variants"], model_dir)
    curve["models"][name] = {**record, "run_dir": str(run_dir), **got, "rows": len(got["scores"]),
                             "train_minutes": None if seconds is None else round(seconds / 60, 1),
                             "eval_minutes": round((time.time() - t0) / 60, 1)}
    write_file(out / CURVE, json.dumps(curve, indent=1), replace=True)
    return curve["models"][name]


def difference(a: dict, b: dict) -> dict:
    d = paired(a["scores"], b["scores"])
    return {"points": round(100 * d.difference, 1), "only_first": d.only_x, "only_second": d.only_y,
            "beyond_noise": d.beyond, "said": d.said()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for the runs and curve.json (kept: a second call resumes)")
    ap.add_argument("--completions", type=int, nargs="+", default=[1000], help="budgets, each arm's completions")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--sft-steps", type=int, default=80, help="the SFT start's steps (8 rows each)")
    ap.add_argument("--eval-rows", type=int, default=500, help="held-out rows every model is scored on")
    ap.add_argument("--no-variants", dest="variants", action="store_false",
                    help="score the held-out rows only, not the family's rewritten and harder copies (a third of the time)")
    ap.add_argument("--sft-recipe", default=str(SFT_RECIPE), help="the start's recipe (default: countdown's SFT)")
    ap.add_argument("--rl-recipe", default=str(RL_RECIPE), help="both arms' recipe (default: countdown's GRPO)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                    help="an override for every stage (repeatable), e.g. model.name=FOLDER")
    args = ap.parse_args(argv)
    from grpokit.recipe import load_recipe

    t = load_recipe(args.rl_recipe, args.overrides).train
    per_step = t.per_device_train_batch_size * t.gradient_accumulation_steps  # completions a step, refill off
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    settings = {"sft_steps": args.sft_steps, "eval_rows": args.eval_rows, "variants": args.variants,
                "sft_recipe": args.sft_recipe,
                "rl_recipe": args.rl_recipe, "overrides": args.overrides}
    curve = read_json(out / CURVE) or {"settings": settings, "models": {}}
    if curve["settings"] != settings:
        sys.exit(f"{out / CURVE} holds a curve with {curve['settings']}, not {settings}: give another --out")
    start = stage(curve, out, "sft", ["sft", args.sft_recipe, "--set", f"train.max_steps={args.sft_steps}"],
                  args.overrides, start=True, completions=0, seed=0, algorithm="sft")
    print(f"start (SFT, {args.sft_steps} steps): {100 * start['solved']:.1f}% of {start['rows']} held-out rows")
    for n in args.completions:
        steps = math.ceil(n / per_step)
        for seed in args.seeds:
            got = {}
            for arm in ARMS:
                command = ["train", args.rl_recipe, "--init-from", str(out / "sft"), "--set", f"train.seed={seed}",
                           "--set", f"train.max_steps={steps}", "--set", "selection.refill=false",
                           "--set", f"train.algorithm={arm}"]
                got[arm] = stage(curve, out, f"{arm}-{n}-s{seed}", command, args.overrides,
                                 completions=steps * per_step, seed=seed, algorithm=arm)
            lines = [f"{arm} {100 * got[arm]['solved']:.1f}% ({got[arm]['completions']} completions, "
                     f"{got[arm]['train_minutes']} min): minus the start {difference(got[arm], start)['said']}"
                     for arm in ARMS]
            lines.append(f"grpo minus rft: {difference(got['grpo'], got['rft'])['said']}")
            curve.setdefault("differences", {})[f"{n}-s{seed}"] = {
                **{f"{arm}-sft": difference(got[arm], start) for arm in ARMS},
                "grpo-rft": difference(got["grpo"], got["rft"])}
            write_file(out / CURVE, json.dumps(curve, indent=1), replace=True)
            print(f"-- {n} completions, seed {seed}\n  " + "\n  ".join(lines), flush=True)
    return 0


if __name__ == "__main__":
    from grpokit.cli.output import run_script

    run_script(main)
