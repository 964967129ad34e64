"""An own reward function checked before any model loads, as training will call it.

`check_own_reward` matches the function's signature against the recipe's params and the data's columns
(grpokit.rewards.signature_problems), then calls it once, as TRL's GRPOTrainer calls reward functions, on a
few real rows of `data.train` (an answer-like and an empty completion each) and reports what training would
trip over (grpokit.rewards.trial_problems). Rows that cannot be read here (an `hf:` dataset, a missing file,
unusable rows) make a note instead: their checks belong to `grpokit data check`.
"""
from __future__ import annotations

from pathlib import Path

Found = list[tuple[tuple, str, str]]

# Rows of data.train an own reward is called on before training: enough to meet a second row shape, few
# enough that a slow reward (a sandbox, an API) costs seconds. Each row gets an answer-like completion and
# an empty one (a policy writes empty completions early in training).
OWN_TRIAL_ROWS = 4
# How long one trial call may take when the reward entry sets no timeout_s: the first call of a reward may load
# a model or warm a cache, so it is generous; a call past it is stopped and reported (never a silent hang).
TRIAL_LIMIT_S = 60.0


def check_own_reward(built, rc, loc: tuple, data, base, notes: list[str]) -> Found:
    """An own reward's signature against its params and the data's columns, then one call as TRL makes it."""
    from grpokit.rewards import reward_title, signature_problems, trial_problems

    fn = built.function
    rows, why_not = _trial_rows(data, base)
    columns = sorted({k for row in rows for k in row}) if rows else None
    out: Found = [((*loc[:2], *suffix) if suffix else loc, what, fix)
                  for suffix, what, fix in signature_problems(fn, rc.params, columns)]
    if out:
        return out
    if not rows:
        notes.append(f"{'.'.join(map(str, loc[:2]))} ({reward_title(rc)}): not called on rows before training "
                     f"({why_not}); `grpokit rewards score --reward {reward_title(rc)} --input ROWS.jsonl` tries it")
        return out
    texts, prompts, cols = _trial_batch(rows, data)
    ids = [[0] * max(1, len(t) // 4) for t in texts]  # stand-in token ids, one per ~4 characters, as lists of ints
    from transformers import TrainerState

    context = {"trainer_state": TrainerState(global_step=0, max_steps=1), "log_extra": lambda *a, **k: None,
               "log_metric": lambda *a, **k: None}
    limit = rc.timeout_s or TRIAL_LIMIT_S
    return [(loc, what, fix) for what, fix in trial_problems(built, texts, cols, prompts, ids, context, limit)]


def _trial_rows(data, base) -> tuple[list[dict], str]:
    """A few usable rows of data.train, as training loads them; ([], why) when they cannot be read here."""
    from grpokit.data import load_rows, resolve_data_path
    from grpokit.errors import GrpokitError

    if data is None:
        return [], "the data section did not validate"
    if data.train.startswith("hf:"):
        return [], f"data.train is the hub dataset {data.train}, not read by `recipe check`"
    path = resolve_data_path(data.train, base)
    if not Path(path).is_file():
        return [], "data.train is not found"
    try:
        rows, _ = load_rows(path, question_field=data.question_field, answer_field=data.answer_field,
                            skip_bad_rows=True, template=data.template)
    except GrpokitError:
        return [], f"data.train has no usable rows; `grpokit data check {data.train}` says why"
    return rows[:OWN_TRIAL_ROWS], ""


def _trial_batch(rows: list[dict], data) -> tuple[list[str], list, dict[str, list]]:
    """(completions, prompts, columns) as TRL hands a reward two completions per row."""
    from grpokit.templates import PromptTemplate

    template = PromptTemplate(data.template, data.system_prompt)
    marker = "最终答案：" if data.template == "plain_zh" else "Final answer:"
    texts, prompts, cols = [], [], {k: [] for k in sorted({k for r in rows for k in r})}
    for row in rows:
        answer = row.get("answer")
        honest = f"{marker} {answer}" if answer not in (None, "") else "I worked through the question."
        for text in (honest, ""):
            texts.append(text)
            prompts.append(template.build(row["question"]))
            for k in cols:
                cols[k].append(row.get(k))
    return texts, prompts, cols
