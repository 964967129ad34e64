"""What a health rollback buys: the same provoked run with the collapse actions at `warn` and at `rollback`.

    python benchmarks/rollback_effect.py                      # demo recipe, lr 1e-4 constant, 30 steps
    python benchmarks/rollback_effect.py --steps 40 --set train.learning_rate=5e-5
    python benchmarks/rollback_effect.py --only rollback --keep /tmp/rb   # one side, run folders kept

Two runs of the recipe (default: the demo's), one after the other, identical except for
`health.actions.entropy_collapse` and `health.actions.correctness_collapse` (warn, then rollback), both with
settings that provoke a collapse (default `train.learning_rate=1e-4`, `train.lr_scheduler_type=constant`: a
rate a user might copy from a bigger model's recipe; on the demo recipe it drives training correctness to 0
while entropy stays at 0.25), a checkpoint every --save-every steps (a rollback restores the last
checkpoint before the problem began, grpokit.training.rollback) and every checkpoint kept. Each run's checkpoints
and the base model are then evaluated greedily on the recipe's held-out rows with grpokit's own evaluation
(`grpokit eval`'s code). Prints, per run: the health findings and actions taken, the token entropy at the
start and at the end, held-out accuracy of every checkpoint, the best and the last checkpoint.

The claim it tests (README "Health: preflight, live monitor, doctor"): with rollback, the run ends on a model no worse than the
warned run's last one, and its last checkpoint stays near its best. If no collapse is provoked, both runs
are the same run and the script says so.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

RECIPE = Path(__file__).resolve().parent.parent / "recipes" / "smollm2-arithmetic.yaml"
PROVOKE = ["train.learning_rate=1e-4", "train.lr_scheduler_type=constant"]
ACTIONS = ("entropy_collapse", "correctness_collapse")  # the codes whose action differs between the two runs


def run_side(action: str, args, out: Path) -> dict:
    from grpokit.evaluation import evaluate_run
    from grpokit.recipe import load_recipe
    from grpokit.run import RunDir
    from grpokit.training import train

    recipe = load_recipe(args.recipe, [*PROVOKE, f"train.max_steps={args.steps}",
                                       f"train.save_steps={args.save_every}", "train.save_total_limit=1000",
                                       "preflight.prompts=0", *(f"health.actions.{code}={action}" for code in ACTIONS),
                                       *args.overrides])
    run_dir = out / action
    t0 = time.time()
    summary = train(recipe, run_dir=run_dir).summary
    train_s = time.time() - t0
    results = evaluate_run(run_dir, max_rows=args.eval_rows)
    run = RunDir(run_dir)
    entropy = [(m["step"], m["entropy"]) for m in run.read_metrics() if m.get("entropy") is not None]
    return {"action": action, "train_s": train_s, "status": summary.get("status"),
            "health": [(h.get("step"), h.get("code"), h.get("action")) for h in run.read_health()],
            "entropy": entropy, "kl": [(m["step"], m["kl"]) for m in run.read_metrics() if m.get("kl") is not None],
            "curve": [(e["step"], e["heldout"]["accuracy"]) for e in results["checkpoints"]]}


def show(side: dict) -> None:
    print(f"\n== {' and '.join(ACTIONS)}: {side['action']}  ({side['train_s']:.0f} s training, status {side['status']})")
    acts = [h for h in side["health"] if h[2] not in (None, "warn")] or side["health"][-3:]
    for step, code, action in acts:
        print(f"   health step {step}: {code} -> {action}")
    e = side["entropy"]
    if e:
        print(f"   token entropy: {e[0][1]:.3f} (step {e[0][0]}) -> {e[-1][1]:.3f} (step {e[-1][0]}), "
              f"lowest {min(v for _, v in e):.3f}")
    if side["kl"]:  # beta > 0 after a rollback: kl against the reference (the restored checkpoint, grpokit.training.rollback)
        k = side["kl"]
        print(f"   kl after the rollback: {k[0][1]:.4f} (step {k[0][0]}) -> {k[-1][1]:.4f} (step {k[-1][0]}), "
              f"highest {max(v for _, v in k):.4f}")
    print("   held-out accuracy by step: " + ", ".join(f"{s}: {a:.1%}" for s, a in side["curve"]))
    trained = [(s, a) for s, a in side["curve"] if s > 0]
    if trained:
        best = max(trained, key=lambda x: x[1])
        print(f"   best checkpoint: step {best[0]} {best[1]:.1%}; last: step {trained[-1][0]} {trained[-1][1]:.1%} "
              f"({(trained[-1][1] - best[1]) * 100:+.1f} pts from the best)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipe", default=str(RECIPE))
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--save-every", type=int, default=5, help="checkpoint interval (what a rollback can restore)")
    ap.add_argument("--eval-rows", type=int, default=100, help="held-out rows evaluated per checkpoint")
    ap.add_argument("--only", choices=["warn", "rollback"], help="run one side only")
    ap.add_argument("--keep", metavar="DIR", help="keep the run folders here (default: a deleted temporary folder)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help=f"override the recipe on both sides, after the provoking {' '.join(PROVOKE)}")
    args = ap.parse_args()
    actions = [args.only] if args.only else ["warn", "rollback"]
    with tempfile.TemporaryDirectory(prefix="grpokit-rollback-") as tmp:
        out = Path(args.keep) if args.keep else Path(tmp)
        sides = [run_side(a, args, out) for a in actions]
    print(f"\n{args.steps} steps of {Path(args.recipe).name} with {' '.join(PROVOKE + args.overrides)}")
    for side in sides:
        show(side)
    rolled = [s for s in sides if any(str(h[2]).startswith("rollback") for h in s["health"])]
    if "rollback" in actions and not rolled:
        print("\nno rollback was taken: nothing collapsed under these settings, so the two runs do not differ")


if __name__ == "__main__":
    main()
