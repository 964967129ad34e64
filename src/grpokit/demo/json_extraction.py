"""`grpokit demo --task json`: GRPO teaches the embedded model to answer with a JSON object of typed fields.

Runs `recipes/smollm2-json-extraction.yaml`: SmolLM2-135M-Instruct on the bundled extraction task
(`builtin:json/`, made by `grpokit data generate json`: a short text -> an object with three typed fields, the
JSON Schema on every row), rewarded by `json_fields` (the share of the gold object's fields right) and
`json_schema` (the object validates against the row's schema). Like the arithmetic demo
(grpokit.demo.common.grpo_before_after) it evaluates the base model on the 100 held-out rows, trains, evaluates
again the same way and prints the table: field accuracy, valid rate (schema-valid), length, cut-off; then
demo.json, eval/results.json and the report. Its figures on the project's 2-core CPU: docs/measurements.md
"JSON extraction".
"""
from __future__ import annotations

from pathlib import Path

from grpokit.demo.common import RECIPES, grpo_before_after

DEMO_RECIPE = RECIPES / "smollm2-json-extraction.yaml"


def run(output_dir: str, overrides: list[str] | None = None, recipe_path: Path | None = None,
        callbacks: list | None = None) -> dict:
    """The demo (module docstring); `callbacks`: further TrainerCallbacks for its training (benchmarks, tests)."""
    return grpo_before_after(Path(recipe_path or DEMO_RECIPE), output_dir, overrides, callbacks, what="texts")
