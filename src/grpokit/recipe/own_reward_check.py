"""An own reward function checked before any model loads, as training will call it.

`check_own_reward` matches the function's signature against the recipe's params and the data's columns
(grpokit.rewards.signature_problems), then calls it once, as TRL's GRPOTrainer calls reward functions, on a
few real rows of `data.train` (an answer-like and an empty completion each) and reports what training would
trip over (grpokit.rewards.trial_problems), each call stopped at its limit (the entry's timeout_s, else
TRIAL_LIMIT_S). When the recipe is checked for training (`recipe check`, `train`: data.train's rows are read
by grpokit.recipe.data_checks.check_data_rows) it is then called on every other row within OWN_SWEEP_BUDGET_S, and
the first row it fails on is an error with the row's file and line; a set too big for the budget is sampled,
and a note says how many rows were covered. Rows that cannot be read here (an `hf:` dataset, a missing file)
make a note instead.
"""
from __future__ import annotations

import random
import time
from pathlib import Path

from grpokit.data import load_rows, resolve_data_path
from grpokit.errors import GrpokitError
from grpokit.rewards import reward_title, signature_problems, trial_problems
from grpokit.templates import PromptTemplate

Found = list[tuple[tuple, str, str]]

# Rows of data.train an own reward is called on before training: enough to meet a second row shape, few
# enough that a slow reward (a sandbox, an API) costs seconds. Each row gets an answer-like completion and
# an empty one (a policy writes empty completions early in training).
OWN_TRIAL_ROWS = 4
# How long one trial call may take when the reward entry sets no timeout_s: the first call of a reward may load
# a model or warm a cache, so it is generous; a call past it is stopped and reported (never a silent hang).
TRIAL_LIMIT_S = 60.0


# With data.train's rows read (`recipe check`, `train`), the reward is then called on every other row, in chunks,
# until this many seconds have passed; a bigger set is sampled (in a seeded random order) and a note says how
# much was covered. Each chunk call has the trial call's limit.
OWN_SWEEP_BUDGET_S = 10.0
OWN_SWEEP_CHUNK = 16  # rows per call: 32 completions, about one training batch


def check_own_reward(built, rc, loc: tuple, data, base, notes: list[str], report=None) -> Found:
    """An own reward's signature against its params and the data's columns, then one call as TRL makes it, then
    (given `report`, data.train's rows as training reads them) a call on every row within OWN_SWEEP_BUDGET_S."""
    fn = built.function
    if report is not None and report.rows:
        rows, why_not = report.rows, ""
    else:
        rows, why_not = _trial_rows(data, base)
    trial = rows[:OWN_TRIAL_ROWS]
    columns = sorted({k for row in trial for k in row}) if trial else None
    out: Found = [((*loc[:2], *suffix) if suffix else loc, what, fix)
                  for suffix, what, fix in signature_problems(fn, rc.params, columns)]
    if out:
        return out
    if not rows:
        notes.append(f"{'.'.join(map(str, loc[:2]))} ({reward_title(rc)}): not called on rows before training "
                     f"({why_not}); `grpokit rewards score --reward {reward_title(rc)} --input ROWS.jsonl` tries it")
        return out
    context = _context()
    limit = rc.timeout_s or TRIAL_LIMIT_S
    texts, prompts, cols = _trial_batch(trial, data)
    out = [(loc, what, fix) for what, fix in trial_problems(built, texts, cols, prompts, _ids(texts), context, limit)]
    # An exception (or an exit) depends on the row: name the row. A wrong return type or length on the trial's
    # first rows does not, and stays as it is.
    if out and report is not None and any(k in out[0][1] for k in ("() raised ", "sys.exit(", "KeyboardInterrupt")):
        located = _locate(built, list(range(len(trial))), loc, data, report, context, limit)
        return located or out
    if out or report is None or len(rows) <= len(trial):
        return out
    return _sweep(built, rc, loc, data, report, context, limit, notes)


def _context() -> dict:
    from transformers import TrainerState

    return {"trainer_state": TrainerState(global_step=0, max_steps=1), "log_extra": lambda *a, **k: None,
            "log_metric": lambda *a, **k: None}


def _ids(texts: list[str]) -> list[list[int]]:
    return [[0] * max(1, len(t) // 4) for t in texts]  # stand-in token ids, one per ~4 characters, as lists of ints


def _sweep(built, rc, loc: tuple, data, report, context: dict, limit: float, notes: list[str]) -> Found:
    """The reward on the rows after the trial ones, chunk by chunk, until the budget is spent: the first row
    it raises on (or returns no score for) is the problem, with the row's file and line."""
    order = list(range(OWN_TRIAL_ROWS, len(report.rows)))
    random.Random(0).shuffle(order)  # a sample of a big set spans the whole file, not its first rows
    start, done = time.monotonic(), OWN_TRIAL_ROWS
    for at in range(0, len(order), OWN_SWEEP_CHUNK):
        if time.monotonic() - start > OWN_SWEEP_BUDGET_S:
            notes.append(f"{'.'.join(map(str, loc[:2]))} ({reward_title(rc)}): called on {done} of "
                         f"{len(report.rows)} rows of data.train in {OWN_SWEEP_BUDGET_S:g} s (a random sample; "
                         "training calls it on the rest)")
            return []
        chunk = order[at:at + OWN_SWEEP_CHUNK]
        found = _failure(built, [report.rows[i] for i in chunk], data, context, limit)
        if found is None:
            done += len(chunk)
            continue
        if "ran past its time limit" in found[0]:  # each row alone could wait as long again
            return [(loc, f"{found[0]}, on rows {', '.join(_where(report, i, data) for i in chunk[:3])}, ...",
                     found[1])]
        return _locate(built, chunk, loc, data, report, context, limit) or [(loc, found[0], found[1])]
    return []


def _locate(built, chunk: list[int], loc: tuple, data, report, context: dict, limit: float) -> Found:
    """A batch of rows failed: the first row that fails on its own, with its file and line and what it holds."""
    for i in chunk:
        found = _failure(built, [report.rows[i]], data, context, limit)
        if found is not None:
            return [(loc, f"{found[0]}, on {_row_label(report, i, data)}", found[1])]
    found = _failure(built, [report.rows[i] for i in chunk], data, context, limit)
    if found is None:
        return []
    rows = ", ".join(_where(report, i, data) for i in chunk[:3])
    return [(loc, f"{found[0]}, on a batch of rows that each pass alone ({rows}, ...)", found[1])]


def _failure(built, rows: list[dict], data, context: dict, limit: float) -> tuple[str, str] | None:
    texts, prompts, cols = _trial_batch(rows, data)
    found = trial_problems(built, texts, cols, prompts, _ids(texts), context, limit)
    if not found:
        return None
    what, fix = found[0]
    what = what.split(", called as TRL calls it")[0]  # the row is named instead
    return what, fix.replace("fix the function;", "fix the function for this row "
                             "(`grpokit rewards score --input ROWS.jsonl` calls it on rows you choose);")


def _where(report, i: int, data) -> str:
    return report.wheres[i].replace(report.path, data.train, 1) if i < len(report.wheres) else f"row {i + 1}"


def _row_label(report, i: int, data) -> str:
    row = report.rows[i]
    question = row.get("question")
    text = question if isinstance(question, str) else str(question)
    return (f"{_where(report, i, data)} (question {text[:60]!r}{'...' if len(text) > 60 else ''}, "
            f"answer {str(row.get('answer'))[:40]!r}; columns: {', '.join(row)})")


def _trial_rows(data, base) -> tuple[list[dict], str]:
    """A few usable rows of data.train, as training loads them; ([], why) when they cannot be read here."""
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
