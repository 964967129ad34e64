"""GRPO after SFT, three ways: the demo's GRPO stage, one that keeps exploring, and one with grpokit's additions off.

    python benchmarks/grpo_after_sft.py --output-dir /tmp/arms-s0                 # seed 0, every arm
    python benchmarks/grpo_after_sft.py --output-dir /tmp/arms-s1 --seed 1
    python benchmarks/grpo_after_sft.py --output-dir /tmp/arms --arms demo,plain --steps 60

From one SFT model (recipes/smollm2-arithmetic-sft.yaml, the demo's warm start), each arm trains GRPO with the
demo's recipe (recipes/smollm2-arithmetic.yaml) and `--init-from`'s continuing settings, changed only by its own
settings (ARMS):

    demo      the demo's GRPO stage as it ships (T 0.7, top-p 0.9, 8 completions, selection and refill on)
    explore   exploration kept (DAPO, Dr. GRPO, ProRL): temperature 1.0 and top-p 1.0, 16 completions a prompt,
              prompts from the mixed band first (selection.mixed_share 0.7), clip-higher epsilon_high 0.28
    plain     grpokit's additions off: no prompt selection, no refill, no skipping of no-signal rows (what a
              plain TRL GRPOTrainer does with the same rows, template, verifier and settings)

The SFT model and every arm's final model are then evaluated the same way (demo.sft_vs_grpo.evaluate_models): greedy
on the held-out rows (default builtin:arithmetic/eval500.jsonl, 500 problems no training row asks) and on their
perturbed and rewritten copies, sampled (8 a row at the demo recipe's T 0.7 / top-p 0.9, so every arm is sampled
alike) for pass@1 / pass@8, and on the JSON family's held-out set (retention). It prints the table, each arm minus
the SFT model with 2 paired standard errors, and writes `arms.json` into --output-dir.
Not covered: more than one seed per call (run it again with --seed), arms from another task's recipes.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SFT_RECIPE, GRPO_RECIPE = ROOT / "recipes" / "smollm2-arithmetic-sft.yaml", ROOT / "recipes" / "smollm2-arithmetic.yaml"
EVAL = "builtin:arithmetic/eval500.jsonl"
ARMS = {
    "demo": [],
    "explore": ["train.temperature=1.0", "train.top_p=1.0", "train.num_generations=16",
                "train.per_device_train_batch_size=32", "selection.mixed_share=0.7", "selection.unseen_share=0.3",
                "trl.epsilon_high=0.28"],
    "plain": ["selection.enabled=false", "selection.refill=false", "train.skip_no_signal=false"],
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--output-dir", required=True, help="a new folder: the SFT run, a run per arm, arms.json")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated, of {', '.join(ARMS)}")
    ap.add_argument("--steps", type=int, default=None, help="GRPO steps of every arm (default: the recipe's)")
    ap.add_argument("--eval", default=EVAL, help=f"held-out rows (default {EVAL})")
    args = ap.parse_args()
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        ap.error(f"unknown arm(s) {unknown}; choose from {', '.join(ARMS)}")

    from grpokit.console import console
    from grpokit.demo.common import paired_difference, said
    from grpokit.demo.sft_vs_grpo import evaluate_models, models_table, retention_recipe
    from grpokit.recipe import load_recipe
    from grpokit.run.writer import write_file
    from grpokit.training import apply_init_from, train, train_sft
    from grpokit.training.lineage import resolve_init_from

    out = Path(args.output_dir)
    common = [f"train.seed={args.seed}", f"data.eval={args.eval}", "data.eval_max_rows=500"]
    say = lambda m: console.print(m, markup=False)  # noqa: E731
    seconds: dict[str, float] = {}

    t0 = time.time()
    sft_recipe = load_recipe(SFT_RECIPE, common)
    train_sft(sft_recipe, run_dir=out / "sft", overwrite=True, kind="demo", log=say)
    seconds["sft"] = time.time() - t0
    targets = {"sft": resolve_init_from(str(out / "sft"))[0]}
    for arm in arms:
        sets = common + ARMS[arm] + ([f"train.max_steps={args.steps}"] if args.steps else [])
        recipe, lineage = apply_init_from(load_recipe(GRPO_RECIPE, sets), str(out / "sft"), sets)
        console.print(f"[bold]{arm}[/]: {' '.join(ARMS[arm]) or 'the demo recipe'} -> {out / arm}")
        t0 = time.time()
        train(recipe, run_dir=out / arm, overwrite=True, init_from=lineage, kind="demo")
        seconds[arm] = time.time() - t0
        targets[arm] = resolve_init_from(str(out / arm))[0]

    evaluated = load_recipe(GRPO_RECIPE, common)  # every model sampled alike: the demo recipe's T and top-p
    models = evaluate_models(evaluated, targets, say, retention_recipe(evaluated))
    for name, s in seconds.items():
        models[name]["minutes"] = s / 60
    lines = []
    for arm in arms:
        for key in ("heldout", *(k for k in models["sft"]["sets"] if k != "heldout")):
            d = paired_difference(models[arm]["sets"].get(key), models["sft"]["sets"].get(key))
            lines.append(f"{arm} minus sft, {key}: {said(d)}")
        d = paired_difference(models[arm].get("retention"), models["sft"].get("retention"))
        lines.append(f"{arm} minus sft, retention: {said(d)}")
    console.print(models_table(models))
    for line in lines:
        console.print(line, highlight=False)
    write_file(out / "arms.json", json.dumps({"seed": args.seed, "arms": {a: ARMS[a] for a in arms}, "models": models,
                                             "differences": lines}, indent=2), within=out, replace=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
