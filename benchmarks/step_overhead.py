"""Step time at equal work: grpokit's training loop against TRL's GRPOTrainer on the same GRPOConfig.

    python benchmarks/step_overhead.py [--steps 8] [--recipe recipes/smollm2-arithmetic.yaml]
    python benchmarks/step_overhead.py --steps 3 --set model.name=/path/to/tiny-model    # a quick check

Two runs, one after the other, in one process, of the same model (the recipe's), on the same prompts (the
recipe's template and training rows), with the GRPOConfig grpokit builds for the recipe
(grpokit.recipe.grpo_args), every completion forced to exactly max_completion_length tokens
(`generation_kwargs: {min_new_tokens: max_completion_length}`: EOS is suppressed) and no checkpoints, so each
step generates, scores and trains on the same number of tokens on both sides:

  trl      trl.GRPOTrainer as it is, with the plain reward functions of benchmarks/baselines/trl_plain.py
           (correctness and a format bonus, the recipe's reward weights) and TRL's own callbacks;
  grpokit  grpokit.training.train: its trainer subclass, reward functions, health monitor, metrics and samples
           files, console line and the other callbacks, with selection, refill and skip_no_signal off.

Why those three are off: refill generates extra groups on purpose (what it spends is logged per step as
grpokit/refill/*), and selection and skip_no_signal change which groups are trained (skip_no_signal skips
the policy pass of tied groups: less work, not equal work).

A step's time is the wall time from one `on_step_begin` to the next (so what callbacks and logging do after
a step counts): steps 1..N-1 are timed (the last step ends in grpokit's final checkpoint save, which TRL
alone does not do), and the median is taken over steps 2..N-1 (step 1 carries warm-up). Prints both medians and the ratio
grpokit / trl (the issue's target: within 10%, i.e. <= 1.10). Run on an otherwise idle machine.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "baselines"))
import trl_plain  # noqa: E402  (benchmark code, not grpokit: the plain side's reward functions)

RECIPE = HERE.parent / "recipes" / "smollm2-arithmetic.yaml"


def step_clock(times: list[float]):
    from transformers import TrainerCallback

    class StepClock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            times.append(time.perf_counter())

    return StepClock()


def equal_work_recipe(path: str, steps: int, overrides: list[str]):
    from grpokit.recipe import load_recipe

    recipe = load_recipe(path, ["selection.enabled=false", "selection.refill=false", "train.skip_no_signal=false",
                                "preflight.prompts=0", f"train.max_steps={steps}", "train.save_steps=100000",
                                *overrides])
    trl = {**recipe.trl, "generation_kwargs": {"min_new_tokens": recipe.train.max_completion_length}}
    return recipe.model_copy(update={"trl": trl})


def run_trl(recipe, out: Path) -> list[float]:
    from trl import GRPOTrainer

    from grpokit import models
    from grpokit.data import load_datasets
    from grpokit.recipe import build_prompt_dataset, grpo_args
    from grpokit.task import template_of

    path = models.resolve_model_path(recipe.model.name)
    tokenizer = models.load_tokenizer(path)
    model = models.load_model(path, recipe.model.dtype, recipe.model.init_kwargs)
    rows, _, _ = load_datasets(recipe)
    dataset, _ = build_prompt_dataset(rows, template_of(recipe), tokenizer, recipe.train.max_prompt_length)
    times: list[float] = []
    trainer = GRPOTrainer(model=model, reward_funcs=[trl_plain.correctness_reward, trl_plain.format_reward],
                          args=grpo_args(recipe, out), train_dataset=dataset, processing_class=tokenizer,
                          callbacks=[step_clock(times)])
    trainer.train()  # seeded by TRL from args.seed, as grpokit's side is
    return times


def run_grpokit(recipe, out: Path) -> list[float]:
    from grpokit.training import train

    times: list[float] = []
    train(recipe, run_dir=out, callbacks=[step_clock(times)])
    return times


def step_times(stamps: list[float]) -> list[float]:
    return [b - a for a, b in zip(stamps, stamps[1:])]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipe", default=str(RECIPE))
    ap.add_argument("--steps", type=int, default=8,
                    help="training steps per side (the first and the last are not counted)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override the recipe on both sides (repeatable)")
    args = ap.parse_args()
    if args.steps < 3:
        ap.error("--steps must be at least 3 (step 1 is warm-up, the last one ends in a save)")
    recipe = equal_work_recipe(args.recipe, args.steps, args.overrides)
    t = recipe.train
    print(f"{recipe.model.name}: {t.per_device_train_batch_size // t.num_generations} prompts x "
          f"{t.num_generations} completions x {t.max_completion_length} tokens a step, {args.steps} steps a side",
          flush=True)
    results = {}
    with tempfile.TemporaryDirectory(prefix="grpokit-overhead-") as tmp:
        results["trl"] = step_times(run_trl(recipe, Path(tmp) / "trl"))
        results["grpokit"] = step_times(run_grpokit(recipe, Path(tmp) / "grpokit"))
    print(f"\n{'side':<9}{'median s/step':>14}   steps 1..N-1 (s)")
    for side, secs in results.items():
        print(f"{side:<9}{statistics.median(secs[1:]):>14.2f}   " + " ".join(f"{s:.1f}" for s in secs))
    ratio = statistics.median(results["grpokit"][1:]) / statistics.median(results["trl"][1:])
    print(f"\ngrpokit / trl step time at equal work: {ratio:.3f} (target <= 1.10)")


if __name__ == "__main__":
    main()
