"""Reward functions the tests' recipes name as their own rewards (`reward_fns:NAME`), in TRL's signature.

Not tests: a module a recipe imports, as a user's rewards.py would be.
"""
from __future__ import annotations

import random

INJECT = {"calls": 0, "bad": set()}  # injected: reward calls (1-based) on which every completion scores 0.5


def length_spread(prompts, completions, **_):
    """Completion length / 40: spread on random text, so a tiny untrained model gets non-zero advantages."""
    return [min(len(c), 40) / 40 for c in completions]


def plus_spread(prompts, completions, op, **_):
    """Spread only on additions (alternating scores inside each group of 2), none elsewhere."""
    return [float(i % 2) if o == "+" else 0.0 for i, o in enumerate(op)]


_rng = random.Random(0)


def injected(prompts, completions, **_):
    """Random scores, constant on the calls listed in INJECT['bad']."""
    INJECT["calls"] += 1
    if INJECT["calls"] in INJECT["bad"]:
        return [0.5] * len(completions)
    return [_rng.random() for _ in completions]


def text_spread(prompts, completions, **_):
    """A score in [0, 1) from each completion's text (crc32): different texts score differently whatever their
    length, so a tiny model whose completions all hit the token limit still gets non-zero advantages."""
    import zlib

    return [zlib.crc32(c.encode()) % 1000 / 1000 for c in completions]


def long_length_spread(prompts, completions, **_):
    """Completion length / 100: spread on any text, so the advantages are non-zero and the weights must move."""
    return [min(len(c), 100) / 100 for c in completions]


def loose_fields(prompts, completions, answer, **_):
    """A field reward compared as text: "34" passes for 34, the loophole json_fields closes (the audit finds it)."""
    import json

    out = []
    for c, a in zip(completions, answer):
        gold = json.loads(a)
        try:
            got = json.loads(c.split("```json\n")[-1].split("\n```")[0])
        except ValueError:
            out.append(0.0)
            continue
        got = got if isinstance(got, dict) else {}
        out.append(sum(str(got.get(k)) == str(v) for k, v in gold.items()) / len(gold))
    return out


def partial_credit(prompts, completions, **_):
    """0.25 for every completion (a tool episode's text too): an own goal check whose mean says it was the one used."""
    return [0.25] * len(completions)


def same_as_answer(prompts, completions, answer, **_):
    """1.0 when the completion is the row's answer text exactly (stripped): a held-out set whose answers are one
    model's own greedy completions scores that model 100% and any other one less (tests/test_probe.py)."""
    return [1.0 if str(c).strip() == str(a).strip() else 0.0 for c, a in zip(completions, answer)]


def even_text(prompts, completions, **_):
    """1.0 for a completion whose text hashes even (crc32), else 0.0: a pass/fail correctness reward that a tiny
    untrained model passes on about half its samples."""
    import zlib

    return [float(zlib.crc32(c.strip().encode()) % 2 == 0) for c in completions]
