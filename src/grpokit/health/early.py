"""A run that cannot start learning the task: correctness flat from the first step while other rewards move.

    detect_correctness_never_moved(metrics, samples, config, context) -> Finding | None

A new user's own task (docs/own-data.md) trained 5 steps with correctness 0 on every one: the model never wrote
`Final answer:`, so no answer was ever read, and the format and length rewards still moved, so groups differed
and neither `zero_variance_groups` nor `nothing_learned` fired; the only warning was truncation. This detector
says so after `correctness_never_steps` logging steps: every correctness reward the policy trains on has scored
the same value (its lowest: no sample ever earned more) at every step since the first, while another trained
reward moved. The latest step's samples say why: none writes an answer line (the recipe's markers are not
known here: the built-in ones and any `...answer:` line count), or they do and are all wrong. `grpokit
preflight` shows the same before training, in about a minute on the CPU: its fix.

Not covered: a correctness reward that moves from the start and falls later (correctness_collapse), a run where
nothing moves at all (nothing_learned).
"""

from __future__ import annotations

import re

from grpokit.health.findings import Finding, metric_series, rounded, values_of
from grpokit.rewards import DEFAULT_MARKERS

_FLAT = 1e-9  # scores equal within float rounding
_ANSWER_LINE = re.compile(r"^\W*(?:final\s+)?answer\s*[:：]", re.IGNORECASE | re.MULTILINE)


def writes_answer_line(text: str) -> bool:
    """Whether a completion has an answer line: a built-in marker (`Final answer:`, `最终答案：`) or `Answer:`."""
    return any(m in text for m in DEFAULT_MARKERS) or bool(_ANSWER_LINE.search(text))


def detect_correctness_never_moved(metrics, samples, config, context) -> Finding | None:
    n = config.correctness_never_steps
    last_step = metrics[-1]["step"]
    for name in context.with_role("correctness"):
        c = metric_series(metrics, f"rewards/{name}/mean")
        if not context.trained(name) or len(c) < n or c[-1][0] != last_step:
            continue
        values = values_of(c)
        low = min(values)
        if max(values) - low > _FLAT or context.full_marks.get(name, low) > low + _FLAT:
            continue  # it moved, or some sampled completion earned more: correctness has signal
        steps = {st for st, _ in c}
        moving = {}
        for other in context.reward_names:
            if other == name or not context.trained(other) or context.roles.get(other) == "correctness":
                continue
            o = [v for st, v in metric_series(metrics, f"rewards/{other}/mean") if st in steps]
            spread = [v for st, v in metric_series(metrics, f"rewards/{other}/std") if st in steps]
            if o and (max(o) - min(o) > _FLAT or any(s > _FLAT for s in spread)):
                moving[other] = [rounded(min(o)), rounded(max(o))]
        if not moving:
            continue  # nothing moves: nothing_learned's case
        texts = [str(x.get("completion", "")) for x in samples]
        written = sum(writes_answer_line(t) for t in texts)
        first = c[0][0]
        if texts and not written:
            why = (
                f" None of the {len(texts)} completions sampled at step {last_step} writes an answer line "
                f"({DEFAULT_MARKERS[0]!r} or another answer marker): the model never writes it, so no answer is "
                "ever read."
            )
        elif texts:
            why = (
                f" {written} of the {len(texts)} completions sampled at step {last_step} write an answer line: the "
                "answers are read and all wrong (too hard for this model, or the reward reads another marker)."
            )
        else:
            why = ""
        others = ", ".join(f"{k} {lo:g}..{hi:g}" for k, (lo, hi) in moving.items())
        return Finding(
            "correctness_never_moved",
            last_step,
            f"{name} has scored {rounded(low):g} on every step since the first (steps {first}-{last_step}) "
            f"while the other rewards moved ({others}): the policy learns those, not the task.{why} Fix: "
            "stop and run `grpokit preflight RECIPE` (baseline rollouts before training, about a minute "
            "on the CPU: what the completions write, their correctness and truncation, the prompts never "
            'solved, and the settings to change); ask for the answer line in data.system_prompt ("End '
            "with the line 'Final answer: ' and the answer\"), raise train.max_completion_length if the "
            "completions are cut off before it, or warm-start with `grpokit sft` on worked solutions "
            "and train `--init-from` it",
            {
                "reward": name,
                "value": rounded(low),
                "steps": [first, last_step],
                "moving": moving,
                "answer_lines": [written, len(texts)],
            },
            since=first,
        )
    return None
