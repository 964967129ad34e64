"""Completions an hour, the loss included, at each recipe's step size, and what the step's matrix products allow.

    python benchmarks/samples_per_hour.py                       # countdown: 16 a step against 256 a step, 3 steps each
    python benchmarks/samples_per_hour.py --steps 5 RECIPE_A RECIPE_B --set train.seed=1
    python benchmarks/samples_per_hour.py recipes/smollm2-countdown-large.yaml:train.gradient_accumulation_steps=1
                                              # a recipe with its own overrides: RECIPE:KEY=VALUE[,KEY=VALUE...]
    python benchmarks/samples_per_hour.py --minutes 8 --eval-rows 100     # learning an hour (below)

Trains each recipe `--steps` steps with grpokit's own training code (`grpokit.training.train`, a temporary run
folder) with the loss computed on every row: `train.skip_no_signal=false` (a group whose completions tie is not
skipped), selection and refill off, the held-out probe off, no checkpoint saved; the recipes' own step shape,
precision and generation settings otherwise. For each recipe it prints, over steps 2..N (step 1 carries one-off
costs), from the run's metrics.jsonl:

  completions/step   prompts x num_generations of one optimizer step (per_device_train_batch_size x
                     gradient_accumulation_steps)
  s/step             the step's wall time (TRL's generation, rewards, every micro-batch's loss forward and backward,
                     the optimizer)
  completions/hour   3600 x completions/step / s/step
  s/completion       and its ratio to the first recipe's (the issue's "a third of the 16-completion step's")
  bound s/step       the step's FLOPs at this machine's fp32 matmul rate, measured in the same process: generation
                     2 x params x generated tokens, the loss (2 forward + 4 backward, + 2 with activation
                     checkpointing) x params x the positions the loss computed (grpokit/positions/computed: the tree
                     of shared prefixes); attention ignored (short rows)
  reward             the mean reward of each step, first and last, and its rise an hour (a slope over the steps: noisy
                     at a few steps; learning an hour needs runs of many steps, `--steps`)

`--minutes M`: learning an hour instead. Each recipe trains as shipped (its selection, refill and skipping of groups
without signal kept; the probe and checkpoints off, so the minutes are training's) until M minutes of wall time have
passed (the step running then finishes), and the model before and after is evaluated greedily on the first
`--eval-rows` held-out rows of the recipe (outside the budget): the solve rate and the mean reward (the countdown
reward's partial credit included), their rise, and the rise an hour. `--set train.seed=1` for the second seed.

Speed and learning are judged on the same host kind in one run: name the CPU beside every figure (docs/measurements.md
"The large step"), and run nothing else meanwhile (two torch jobs on two cores slow both several times).
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch
from roofline import matmul_gflops  # noqa: E402  (beside this script)
from transformers import TrainerCallback

DEFAULT = ["recipes/smollm2-countdown.yaml", "recipes/smollm2-countdown-large.yaml"]
EVERY_ROW = ["train.skip_no_signal=false", "selection.enabled=false", "selection.refill=false", "health.probe_rows=0",
             "train.save_steps=100000", "preflight.prompts=0"]


LEARNING = ["health.probe_rows=0", "train.save_steps=100000", "preflight.prompts=0", "train.max_steps=100000"]


class StepClock(TrainerCallback):
    """Each optimizer step's wall time (on_step_begin to on_step_end); training stops once `budget` seconds of
    steps have passed (None: the recipe's max_steps decide)."""

    def __init__(self, budget: float | None = None):
        self.times: list[float] = []
        self.t0 = 0.0
        self.budget = budget

    def on_step_begin(self, args, state, control, **kw):
        self.t0 = time.perf_counter()

    def on_step_end(self, args, state, control, **kw):
        self.times.append(time.perf_counter() - self.t0)
        if self.budget is not None and sum(self.times) >= self.budget:
            control.should_training_stop = True


def held_out(model, tokenizer, recipe, rows: int) -> dict:
    """Greedy solve rate and mean reward of `model` on the recipe's first `rows` held-out rows."""
    from grpokit.data import load_datasets
    from grpokit.evaluation import evaluate

    result = evaluate(model, tokenizer, recipe, load_datasets(recipe)[1][:rows])
    reward = sum(v for v in result.reward_means.values() if v is not None)
    return dict(solve_rate=round(result.accuracy, 4), mean_reward=round(reward, 4), rows=result.rows)


_BEFORE: dict[tuple, dict] = {}


def learn(spec: str, minutes: float, rows: int, overrides: list[str]) -> dict:
    from grpokit import models
    from grpokit.recipe import load_recipe
    from grpokit.training import train

    path, own = variant(spec)
    recipe = load_recipe(path, [*overrides, *own, *LEARNING])
    name = models.resolve_model_path(recipe.model.name)
    tokenizer = models.load_tokenizer(name)
    key = (name, recipe.data.eval, recipe.data.system_prompt, recipe.train.max_completion_length, rows)
    if key not in _BEFORE:  # the starting model's figures, once a process for each evaluation setting
        _BEFORE[key] = held_out(models.load_model(name, recipe.model.dtype), tokenizer, recipe, rows)
    before = _BEFORE[key]
    clock = StepClock(budget=60 * minutes)
    with tempfile.TemporaryDirectory(prefix="grpokit-sph-") as tmp:
        result = train(recipe, run_dir=Path(tmp) / "run", callbacks=[clock])
        lines = [json.loads(x) for x in (result.run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    after = held_out(result.model, tokenizer, recipe, rows)
    hours = sum(clock.times) / 3600
    t = recipe.train
    completions = len(clock.times) * t.per_device_train_batch_size * t.gradient_accumulation_steps
    rewards = [m["reward"] for m in lines if "reward" in m]
    return dict(recipe=spec, overrides=overrides, status=result.summary.get("status"), steps=len(clock.times),
                minutes=round(60 * hours, 1), completions=completions, before=before, after=after,
                solve_rate_rise_per_hour=round((after["solve_rate"] - before["solve_rate"]) / hours, 4),
                reward_rise_per_hour=round((after["mean_reward"] - before["mean_reward"]) / hours, 4),
                train_reward_first_last=[rewards[0], rewards[-1]] if rewards else None)


def variant(spec: str) -> tuple[str, list[str]]:
    """RECIPE or RECIPE:KEY=VALUE[,KEY=VALUE...] -> (the recipe's path, its own overrides)."""
    path, _, own = spec.partition(":")
    return path, [o for o in own.split(",") if o]


def measure(spec: str, steps: int, overrides: list[str], gflops: float) -> dict:
    from grpokit.recipe import load_recipe
    from grpokit.training import train

    path, own = variant(spec)
    recipe = load_recipe(path, [*EVERY_ROW, *overrides, *own, f"train.max_steps={steps}"])
    t = recipe.train
    clock = StepClock()
    with tempfile.TemporaryDirectory(prefix="grpokit-sph-") as tmp:
        result = train(recipe, run_dir=Path(tmp) / "run", callbacks=[clock])
        lines = [json.loads(x) for x in (result.run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    rows = [m for m in lines if "reward" in m]
    params = sum(p.numel() for p in result.model.parameters())
    later = slice(1, None) if len(clock.times) > 1 else slice(None)
    seconds = sum(clock.times[later]) / len(clock.times[later])
    completions = t.per_device_train_batch_size * t.gradient_accumulation_steps
    generated = sum(m.get("completions/mean_length", 0.0) for m in rows[later]) / max(1, len(rows[later]))
    # positions the loss's pass with gradients computed, summed over the step's micro-batches (grpokit.training.logps)
    computed = sum(m.get("grpokit/positions/computed", 0.0) for m in rows[later]) / max(1, len(rows[later]))
    loss_flop = (6 + (2 if recipe.model.gradient_checkpointing else 0)) * params * computed
    bound = (2 * params * generated * completions + loss_flop) / (gflops * 1e9)
    rewards = [m["reward"] for m in rows]
    hours = sum(clock.times) / 3600
    return dict(recipe=spec, status=result.summary.get("status"), completions_per_step=completions,
                s_per_step=round(seconds, 2), completions_per_hour=round(3600 * completions / seconds),
                s_per_completion=round(seconds / completions, 4), bound_s_per_step=round(bound, 2),
                x_bound=round(seconds / bound, 2), mean_completion_tokens=round(generated, 1),
                step_times=[round(x, 1) for x in clock.times], reward_first=rewards[0] if rewards else None,
                reward_last=rewards[-1] if rewards else None,
                reward_rise_per_hour=round((rewards[-1] - rewards[0]) / hours, 3) if len(rewards) > 1 else None)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recipes", nargs="*", default=DEFAULT, help="recipes to compare (the first is the reference), each RECIPE or "
                    "RECIPE:KEY=VALUE[,KEY=VALUE...]")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override every recipe, e.g. train.seed=1")
    ap.add_argument("--minutes", type=float, help="learning an hour: train each recipe this many minutes, then "
                    "evaluate (the module docstring)")
    ap.add_argument("--eval-rows", type=int, default=200, help="held-out rows evaluated before and after (--minutes)")
    args = ap.parse_args(argv)
    if args.minutes:
        for path in args.recipes:
            print(json.dumps(learn(path, args.minutes, args.eval_rows, args.overrides)), flush=True)
        return 0
    gflops = max(matmul_gflops().values())
    print(json.dumps(dict(threads=torch.get_num_threads(), fp32_matmul_gflops=round(gflops, 1))), flush=True)
    first = None
    for path in args.recipes:
        r = measure(path, args.steps, args.overrides, gflops)
        first = first or r
        r["cost_vs_first"] = round(r["s_per_completion"] / first["s_per_completion"], 3)
        print(json.dumps(r), flush=True)
    return 0


if __name__ == "__main__":
    from grpokit.cli.output import run_script

    run_script(main)
