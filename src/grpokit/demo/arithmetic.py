"""`grpokit demo --task arithmetic-grpo`: GRPO from the base model alone, end to end, with a before/after table.

The default demo (`grpokit demo`, grpokit.demo.warm_start) puts an SFT warm start before the same GRPO recipe:
the better final model on this task; this one shows what GRPO alone does.

Runs `recipes/smollm2-arithmetic.yaml`: SmolLM2-135M-Instruct (embedded,
converted from GGUF once and cached), a bundled generated arithmetic task,
`math_correctness` + `format` rewards. It evaluates the model on held-out
problems before training, trains, evaluates again with the same greedy
decoding, template and verifiers, prints the table (accuracy, format rate,
length, cut-off), writes `demo.json` into the run directory, records both
evaluations in `eval/results.json` (as steps 0 and the last step) and ends by
writing the run report (`report/report.html`, see `grpokit.report`) and
printing its path: grpokit.demo.common.grpo_before_after. Its time and tables
on the project's 2-core CPU: docs/quickstart.md "What it prints, and how to
read it".
"""
from __future__ import annotations

from pathlib import Path

from grpokit.demo.common import RECIPES, grpo_before_after

DEMO_RECIPE = RECIPES / "smollm2-arithmetic.yaml"


def run(output_dir: str, overrides: list[str] | None = None, recipe_path: Path | None = None,
        callbacks: list | None = None) -> dict:
    """The demo (module docstring); `callbacks`: further TrainerCallbacks for its training (benchmarks, tests)."""
    return grpo_before_after(Path(recipe_path or DEMO_RECIPE), output_dir, overrides, callbacks, what="problems")
