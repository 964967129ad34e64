"""Held-out accuracy per minute of training: grpokit's demo recipe against a plain TRL script, same budget.

    python benchmarks/learning_efficiency.py [--budget-min 8] [--points 4] [--eval-rows 200] [--seed 0]
    python benchmarks/learning_efficiency.py --only grpokit --set train.skip_no_signal=false   # one variant
    python benchmarks/learning_efficiency.py --results le.json          # both sides, curves kept in le.json
    python benchmarks/learning_efficiency.py --only baseline --baseline-max-new-tokens 48 --reuse le.json
                                                # an equal-length baseline against the grpokit curve measured before

Two runs, one after the other, each given --budget-min minutes of training wall
time (model loading and evaluation not counted) on the same model (embedded
SmolLM2-135M-Instruct), the same training data, the same training seed (--seed)
and the same held-out rows (grpokit's bundled arithmetic train.jsonl; eval.jsonl's
100 rows, then, for --eval-rows above 100, generated problems in neither file):

  baseline  benchmarks/baselines/trl_plain.py (plain TRL GRPOTrainer, the articles'
            settings, no grpokit code), run as a subprocess;
  grpokit   recipes/smollm2-arithmetic.yaml through grpokit.training.train (run dir in a
            temporary folder), max_steps lifted so the budget decides.

Each run saves a checkpoint every budget/points minutes and at the end. The base
model and every checkpoint are then evaluated greedily with ONE check for both
(trl_plain.check: a `Final answer: N` line; the last N equals the gold), each
with the prompt it was trained with and its own max_completion_length. Prints
both curves (accuracy and format rate against training seconds) and, for the
baseline's final accuracy (and format rate), the time each run first reached it
and the ratio baseline_time / grpokit_time (grpokit aims at >= 2). A
ratio needs the baseline to have improved on the base model; otherwise it is
reported as not defined. The two sides prompt differently (grpokit's base model
may already score above the baseline's final figure), so a second ratio
compares gains: the time each side takes to gain, over its own base model, what
the baseline gained by its end (`gain_ratio`). Run on an otherwise idle machine: the two runs are
compared by wall time.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE / "baselines"))
import trl_plain  # noqa: E402  (benchmark code, not grpokit)

RECIPE = ROOT / "recipes" / "smollm2-arithmetic.yaml"
HELD_OUT_SEED = 12345  # the generated held-out rows beyond eval.jsonl's 100 (any fixed seed: they exclude train/eval)


def held_out_file(rows: int, tmp: Path) -> Path:
    """The bundled 100 held-out rows, then (for --eval-rows above 100) problems generated with a fixed seed that are
    in neither train.jsonl nor eval.jsonl, so both sides evaluate the same rows and none was trained on."""
    from grpokit.families.math import generate

    held = trl_plain.read_jsonl(trl_plain.EVAL)
    if rows > len(held):
        seen = {r["question"] for r in trl_plain.read_jsonl(trl_plain.TRAIN) + held}
        held += generate(rows - len(held), seed=HELD_OUT_SEED, exclude=seen)
    path = tmp / "held_out.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in held[:rows]))
    return path


def run_baseline(budget_min: float, every_min: float, held_out: Path, tmp: Path, max_new_tokens: int,
                 seed: int) -> list[dict]:
    results = tmp / "baseline.json"
    cmd = [sys.executable, str(HERE / "baselines" / "trl_plain.py"), "--out", str(tmp / "baseline"),
           "--budget-min", str(budget_min), "--checkpoint-every-min", str(every_min), "--seed", str(seed),
           "--eval-file", str(held_out), "--eval-rows", str(10**9),  # every row: the file holds just --eval-rows
           "--results", str(results), "--max-completion-length", str(max_new_tokens)]
    print("baseline:", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    return json.loads(results.read_text())


def run_grpokit(budget_min: float, every_min: float, held_out: Path, tmp: Path, overrides: list[str],
                seed: int) -> list[dict]:
    import torch
    from transformers import AutoModelForCausalLM

    from grpokit import models
    from grpokit.recipe import load_recipe
    from grpokit.run import RunDir
    from grpokit.task import template_of
    from grpokit.training import train

    recipe = load_recipe(RECIPE, ["train.max_steps=100000", "train.save_steps=100000",
                                  "train.save_total_limit=1000", "preflight.prompts=0", f"train.seed={seed}",
                                  *overrides])
    budget = trl_plain.TimeBudget(budget_min * 60, every_min * 60)
    run_dir = tmp / "grpokit"
    print(f"grpokit: {RECIPE.name}, {budget_min} min -> {run_dir}", flush=True)
    train(recipe, run_dir=run_dir, callbacks=[budget])

    model_path = models.resolve_model_path(recipe.model.name)
    tokenizer = models.load_tokenizer(model_path)
    template = template_of(recipe)
    rows = trl_plain.read_jsonl(held_out)
    prompts = [template.render(tokenizer, template.build(r["question"])) for r in rows]
    golds = [r["answer"] for r in rows]
    n_new = recipe.train.max_completion_length
    points = [{"step": 0, "seconds": 0.0,
               **trl_plain.evaluate(AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32),
                                    tokenizer, prompts, golds, n_new)}]
    for step, secs in sorted(budget.saved.items()):
        ckpt = RunDir(run_dir).checkpoints_dir / f"checkpoint-{step}"
        points.append({"step": step, "seconds": round(secs, 1),
                       **trl_plain.evaluate(AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32),
                                            tokenizer, prompts, golds, n_new)})
    return points


def first_reach(points: list[dict], key: str, target: float) -> float | None:
    return next((p["seconds"] for p in points if p[key] >= target), None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget-min", type=float, default=8.0, help="training minutes for each run")
    ap.add_argument("--points", type=int, default=4, help="checkpoints (evaluation points) per run")
    ap.add_argument("--eval-rows", type=int, default=200,
                    help="held-out rows evaluated at each point (eval.jsonl's 100, then generated unseen problems)")
    ap.add_argument("--seed", type=int, default=0, help="training seed of both runs")
    ap.add_argument("--only", choices=["baseline", "grpokit"], help="run one side only")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override grpokit's recipe (repeatable), e.g. --set train.skip_no_signal=false")
    ap.add_argument("--baseline-max-new-tokens", type=int, default=24,
                    help="the baseline's max_completion_length (24: the articles'; 48: grpokit's, equal work)")
    ap.add_argument("--results", help="write both curves here as JSON")
    ap.add_argument("--reuse", metavar="RESULTS.json",
                    help="take the side --only does not run from an earlier --results file (same budget and rows)")
    args = ap.parse_args()
    every = args.budget_min / args.points

    curves: dict[str, list[dict]] = {}
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="grpokit-lefficiency-") as tmp:
        held_out = held_out_file(args.eval_rows, Path(tmp))
        if args.only != "grpokit":
            curves["baseline"] = run_baseline(args.budget_min, every, held_out, Path(tmp),
                                             args.baseline_max_new_tokens, args.seed)
            if args.results:  # kept even if the grpokit side fails
                Path(args.results).write_text(json.dumps(curves, indent=1))
        if args.only != "baseline":
            curves["grpokit"] = run_grpokit(args.budget_min, every, held_out, Path(tmp), args.overrides, args.seed)
    if args.results:
        Path(args.results).write_text(json.dumps(curves, indent=1))
    if args.reuse:
        for name, points in json.loads(Path(args.reuse).read_text()).items():
            curves.setdefault(name, points)

    print(f"\nheld-out ({args.eval_rows} rows, greedy, one check for both), {args.budget_min} min training each; "
          f"whole benchmark {(time.time() - t0) / 60:.1f} min")
    for name, points in curves.items():
        print(f"\n{name}")
        print(f"{'step':>6}{'train s':>9}{'accuracy':>10}{'format':>9}")
        for p in points:
            print(f"{p['step']:>6}{p['seconds']:>9.0f}{p['accuracy']:>10.1%}{p['format_rate']:>9.1%}")
    print(json.dumps(curves))
    if set(curves) != {"baseline", "grpokit"}:
        return
    for key in ("accuracy", "format_rate"):
        base, ours = curves["baseline"], curves["grpokit"]
        target = base[-1][key]
        if target <= max(base[0][key], ours[0][key]):
            print(f"{key}: time-to-reach ratio not defined (baseline final {target:.1%} is no better than a base "
                  f"model: baseline {base[0][key]:.1%}, grpokit {ours[0][key]:.1%})")
            continue
        tb, tg = first_reach(base, key, target), first_reach(ours, key, target)
        if tg is None:
            print(f"{key}: grpokit never reached the baseline's final {target:.1%} (baseline at {tb:.0f}s)")
        else:
            print(f"{key}: baseline's final {target:.1%} reached at {tb:.0f}s (baseline) vs {tg:.0f}s (grpokit): "
                  f"ratio {tb / max(tg, 1e-9):.2f}")
    for key in ("accuracy", "format_rate"):
        print(gain_ratio(curves["baseline"], curves["grpokit"], key))


def gain_ratio(base: list[dict], ours: list[dict], key: str) -> str:
    """Time to gain what the baseline gained over its own base model: each side starts from its own prompt's base
    figure, so a better prompt is not counted as training (the ratio above counts it)."""
    gain = base[-1][key] - base[0][key]
    if gain <= 0:
        return f"{key} gain: not defined (the baseline gained {gain:+.1%} over its base model)"
    tb = first_reach(base, key, base[0][key] + gain - 1e-9)  # 1e-9: the sum of two rates is not exact in floats
    tg = first_reach(ours, key, ours[0][key] + gain - 1e-9)
    if tg is None:
        return (f"{key} gain: grpokit never gained the baseline's {gain:+.1%} (baseline at {tb:.0f}s; grpokit's "
                f"best {max(p[key] for p in ours) - ours[0][key]:+.1%})")
    return f"{key} gain {gain:+.1%} over each side's base model: baseline {tb:.0f}s, grpokit {tg:.0f}s: " \
           f"ratio {tb / max(tg, 1e-9):.2f}"


if __name__ == "__main__":
    main()
