"""Throughput of the math_correctness reward on 10,000 realistic GSM8K-style completions.

    python benchmarks/bench_math_correctness.py [--n 10000] [--data GSM8K/test.jsonl]

Completions are built from GSM8K rows (the rationale with its calculator
annotations removed, as a model would write it) in the shapes a policy
produces during training, with a fixed seed: right and wrong answers, English
and Chinese markers, \\boxed{}, <think> blocks, units and separators, hedges,
refusals, long rambling reasoning (~5k chars) and a few 100k-character
runaways. They are scored through the registered reward in TRL-sized batches
of 16, single process, single thread. Prints completions per second.

Not measured: math-verify's symbolic path (GSM8K answers are numbers, which
the fast path settles; a symbolic comparison costs ~1 ms, its first ~1 s).
"""
from __future__ import annotations

import argparse
import json
import random
import re
import time
from pathlib import Path

from grpokit.rewards import build_reward, parse_gold

_DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "gsm8k" / "test.jsonl"
_BATCH = 16  # completions per reward call: a typical per_device_train_batch_size
_CALC = re.compile(r"<<[^>]*>>")


def _shapes(rationale: str, gold: str, rng: random.Random) -> list[tuple[float, str]]:
    """(weight, completion) for one row; weights mimic a mid-training mix."""
    plain = gold.replace(",", "")  # a few GSM8K golds are written "2,125"
    wrong = str(int(float(plain)) + rng.choice([-2, -1, 1, 10])) if re.fullmatch(r"-?\d+(\.\d+)?", plain) else gold + "1"
    ramble = "\n".join(f"Let me re-check step {i}: the numbers still add up." for i in range(100))
    return [
        (30, f"{rationale}\nFinal answer: {gold}"),
        (20, f"{rationale}\nFinal answer: {wrong}"),
        (8, f"{rationale}\n最终答案：{gold}个"),
        (6, f"{rationale}\nSo the answer is $\\boxed{{{gold}}}$."),
        (6, f"<think>\n{rationale}\nHmm, let me verify.\n</think>\nFinal answer: {gold}"),
        (4, f"{rationale}\nFinal answer: ${int(float(gold)):,} dollars" if gold.lstrip("-").isdigit() else f"{rationale}\nFinal answer: {gold}"),
        (4, f"{rationale}\nFinal answer: {wrong} or {gold}"),
        (3, f"{rationale}\n最终答案：不知道"),
        (5, f"{rationale}\n{ramble}\nFinal answer: {gold}"),
        (5, f"<think>\n{rationale}\n{ramble}"),  # truncated inside think
        (4, f"{rationale}\nThe answer is {gold}."),  # no marker
        (1, f"{rationale}\n" + "I need to think more. " * 4600 + f"\nFinal answer: {gold}"),  # ~100k chars
    ]


def build_completions(rows: list[dict], n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    completions, answers = [], []
    while len(completions) < n:
        row = rng.choice(rows)
        gold = parse_gold(row["answer"])
        rationale = _CALC.sub("", row["answer"].split("####")[0]).strip()
        weights, texts = zip(*_shapes(rationale, gold, rng))
        completions.append(rng.choices(texts, weights=weights)[0])
        answers.append(row["answer"])
    return completions, answers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000, help="completions to score")
    parser.add_argument("--data", default=str(_DEFAULT_DATA), help="GSM8K-style JSONL (question, answer)")
    args = parser.parse_args()

    rows = [json.loads(line) for line in Path(args.data).read_text(encoding="utf-8").splitlines() if line.strip()]
    completions, answers = build_completions(rows, args.n)
    reward = build_reward("math_correctness")
    chars = sum(map(len, completions))

    start = time.perf_counter()
    scores: list = []
    for i in range(0, len(completions), _BATCH):
        scores += reward(prompts=None, completions=completions[i:i + _BATCH], answer=answers[i:i + _BATCH])
    elapsed = time.perf_counter() - start

    scored = [s for s in scores if s is not None]
    print(f"math_correctness: {len(completions)} completions ({chars / 1e6:.1f} M chars) in {elapsed:.2f} s "
          f"= {len(completions) / elapsed:,.0f} completions/s; mean reward {sum(scored) / len(scored):.3f}, "
          f"errors {reward.errors}")


if __name__ == "__main__":
    main()
