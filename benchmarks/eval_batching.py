"""Greedy evaluation time by rows per generate call: the fixed sizes against grpokit's token-budget default.

    python benchmarks/eval_batching.py                                   # demo recipe, 16,32,64,auto
    python benchmarks/eval_batching.py RECIPE --sizes 16,auto --repeat-rows 2

Generates the recipe's held-out questions greedily with `grpokit.evaluation.generate` (the path `grpokit eval`
and the demo take) once per size, `auto` being `grpokit.generation.rows_per_call`, and prints the seconds and
whether the completions equal the first size's (greedy ids must not depend on the padding). One untimed
warm-up call first. `--repeat-rows K` evaluates the rows K times over (bigger sets than the recipe's).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # this checkout's grpokit
RECIPE = Path(__file__).resolve().parents[1] / "recipes" / "smollm2-arithmetic.yaml"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("recipe", nargs="?", default=str(RECIPE))
    p.add_argument("--sizes", default="16,32,64,auto", help="rows per call, comma-separated; auto = the default")
    p.add_argument("--repeat-rows", type=int, default=1)
    args = p.parse_args()
    from grpokit import models
    from grpokit.data import load_datasets
    from grpokit.evaluation import generate
    from grpokit.generation import rows_per_call
    from grpokit.recipe import load_recipe
    from grpokit.task import Task

    recipe = load_recipe(args.recipe)
    path = models.resolve_model_path(recipe.model.name)
    tokenizer, model = models.load_tokenizer(path), models.load_model(path, recipe.model.dtype)
    _, rows, _ = load_datasets(recipe)
    task = Task.of(recipe)
    questions = [r["question"] for r in rows] * args.repeat_rows
    max_new = task.generation.max_new_tokens
    generate(model, tokenizer, task.template, questions[:4], max_new)  # warm-up
    width = max(len(task.template.encode(tokenizer, task.template.build(q))) for q in questions)
    print(f"{len(questions)} questions, longest prompt {width} tokens, {max_new} new tokens; "
          f"auto = {rows_per_call(len(questions), width, max_new)} rows a call")
    first = None
    for size in args.sizes.split(","):
        t = time.perf_counter()
        texts, _ = generate(model, tokenizer, task.template, questions, max_new,
                            batch_size=None if size == "auto" else int(size))
        seconds = time.perf_counter() - t
        first = first or texts
        same = sum(a == b for a, b in zip(first, texts))
        print(f"rows a call {size:>5}: {seconds:6.1f} s   completions equal to the first size's: {same}/{len(texts)}")


if __name__ == "__main__":
    main()
