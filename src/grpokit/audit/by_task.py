"""The reward audit by task: the tricks of the task's family, when its family has its own (an answer form).

    family = audit_family(task)              # the task's family (grpokit.families), None: the answer-line audit
    result = audit_task(task, family)        # the family's tricks, scored as training scores them

A recipe's family is the one its correctness reward reads (grpokit.families.family_of). Code (`code_tests`),
JSON (`json_schema`) and SQL (`sql_exec`) each declare an `AnswerForm` in their family module (its tricks, what
a row needs, the honest answers), so a new form is part of a new family (docs/extending.md). A family whose
answers sit on an answer line declares an `AnswerLines` form (math: grpokit.families.answer_lines, whose tricks
read the recipe's markers), which grpokit.audit.rewards scores, as it does for a task judged by an own reward;
tool episodes get the tool hacks (grpokit.audit.tools).
Each row gets an honest right answer (where the row has one), an honest wrong answer and the tricks, all scored
by the weighted sum of every reward of the recipe, with the row's columns and prompt as training gives them.

For these tasks a trick is a loophole when it scores MORE than the honest wrong answer: their correctness
reward gives a failed attempt and a failed trick the same score (0, or the compile penalty), so a tie earns a
policy nothing a failed attempt does not; a trick that beats it does. The reward is blind on a row where the
honest right answer does not beat the honest wrong one. (The answer-line audit is stricter, "at least as
much", because there a format reward pays honest layout: a trick tying with a wrong answer already earns it.)

`audit_progress` is the audit's heartbeat: a start line, and a status line at least every 30 s where no
terminal shows the work (grpokit.console.Heartbeat).
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from grpokit.audit.rewards import TIE, AuditResult, TrickResult, score_all
from grpokit.console import Heartbeat, hms
from grpokit.families import AnswerForm, Family
from grpokit.task import recipe_rewards


def audit_family(task) -> Family | None:
    """The task's family when it has an answer form of its own (not answer lines); None: the answer-line audit's
    task (grpokit.audit.rewards, with the family's AnswerLines form, or the default one)."""
    family = task.family
    return family if family is not None and isinstance(family.audit, AnswerForm) else None


def no_tricks(task) -> str | None:
    """Why no trick fits the task (a family that declares none: tool episodes outside an environment); None when
    some do."""
    family = task.family
    if family is None or family.audit is not None:
        return None
    where = " outside a tool environment (env:)" if family.episodes else ""
    return f"no tricks for {family.name} answers{where}"


@dataclass
class Prepared:
    row: dict
    prompt: Any
    right: str | None
    wrongs: list[str]
    tricks: dict[str, str]


def _prepare(form: AnswerForm, row: dict, prompt: Any) -> Prepared | None:
    """A row's honest answers and the completions of the form's tricks; None: the row lacks what they need."""
    r = form.prepare(row)
    if r is None:
        return None
    right, wrongs = form.honest(r)
    if not wrongs:
        return None
    tricks = {n: t.build(r) for n, t in form.tricks.items()}
    return Prepared(row, prompt, right, wrongs, {n: v for n, v in tricks.items() if v is not None})


@dataclass
class TaskAuditResult(AuditResult):
    """The audit of a code, JSON or SQL task: grpokit.audit.rewards.AuditResult with its form and correctness
    reward. A flagged trick scores more than an honest wrong answer (the module docstring says why)."""

    kind: str = ""  # the family's name (a key of grpokit.families.FAMILIES)
    form: AnswerForm | None = None
    reward: str = ""  # the correctness reward's name
    notes: list[str] = field(default_factory=list)

    beats = none_beats = "more than"

    def head(self) -> list[str]:
        rights = [r for r in self.honest_right if r is not None]
        right = f"{sum(rights) / len(rights):.3f} ({len(rights)} row(s) with a reference)" if rights else \
            "- (no row has a reference solution)"
        wrong = sum(self.honest_wrong) / max(1, len(self.honest_wrong))
        lines = [f"reward audit ({self.form.what}, for {self.reward}) on {self.rows} training row(s): honest right "
                 f"{right}, honest wrong {wrong:.3f}"]
        if self.skipped_rows:
            lines.append(f"({self.skipped_rows} row(s) skipped: without {self.form.needs})")
        return lines + self.notes

    def blind_fix(self) -> str:
        return f"check the reference solutions and the {self.reward} reward's params"


@contextlib.contextmanager
def audit_progress(what: str, log: Callable[[str], None] | None = None):
    """A start line (through `log`), then a status line at least every 30 s until the block ends."""
    t0 = time.monotonic()
    if log is not None:
        log(f"reward audit: {what}")
    with Heartbeat(lambda: f"reward audit: {what}; {hms(time.monotonic() - t0)} so far"):
        yield


def _think(rewards) -> bool:
    return any(fn.params.get("require_think") for fn, _ in rewards)


def audit_task(task, family: Family, max_rows: int = 8, log: Callable[[str], None] | None = None
               ) -> TaskAuditResult:
    """Score the family's honest answers and tricks on up to `max_rows` training rows (ValueError: none fits)."""
    form = family.audit
    rewards = recipe_rewards(task)
    prepared, skipped = [], 0
    for row in task.rows()[0]:
        if len(prepared) >= max_rows:
            break
        p = _prepare(form, row, task.prompt_of(row) if "question" in row else None)
        if p is None:
            skipped += 1
        else:
            prepared.append(p)
    if not prepared:
        raise ValueError(f"no training row has {form.needs}; the {form.what} need them")
    think = _think(rewards)
    texts, owners = [], []  # (row index, "right" | "wrong#k" | trick name)
    for i, p in enumerate(prepared):
        items = ([("right", p.right)] if p.right is not None else []) + [(f"wrong#{k}", w) for k, w in enumerate(p.wrongs)]
        for kind_name, text in items + list(p.tricks.items()):
            texts.append(f"<think>\nI work through the task.\n</think>\n{text}" if think and text else text)
            owners.append((i, kind_name))
    keys = sorted({k for p in prepared for k in p.row})
    columns = {k: [prepared[i].row.get(k) for i, _ in owners] for k in keys}
    prompts = [prepared[i].prompt for i, _ in owners]
    names = ", ".join(fn.name for fn, _ in rewards)
    with audit_progress(f"{len(texts)} completions of {len(prepared)} row(s) ({form.what}) scored by {names}", log):
        totals, parts, errors, first = score_all(rewards, texts, columns,
                                                 prompts if all(p is not None for p in prompts) else None)
    by_row: list[dict[str, tuple[float, str, dict]]] = [{} for _ in prepared]
    for j, ((i, name), total, text) in enumerate(zip(owners, totals, texts)):
        by_row[i][name] = (total, text, {n: p[j] for n, p in parts.items()})
    rights = [row.get("right", (None,))[0] for row in by_row]
    wrongs, wrong_parts = [], []
    for row, right in zip(by_row, rights):
        tried = [row[k] for k in sorted(k for k in row if k.startswith("wrong#"))]
        chosen = next((w for w in tried if right is None or w[0] < right - TIE), tried[0])
        wrongs.append(chosen[0])
        wrong_parts.append(chosen[2])
    results = {n: TrickResult(n, t.description) for n, t in form.tricks.items()}
    for row, wrong, wparts in zip(by_row, wrongs, wrong_parts):
        for name, res in results.items():
            if name not in row:
                continue
            score, text, tparts = row[name]
            res.record(score, text, wrong, flagged=score > wrong + TIE,  # beats an honest failed attempt
                       parts=tparts, wrong_parts=wparts)
    c = task.correctness
    return TaskAuditResult([r for r in results.values() if r.rows], len(prepared), rights, wrongs, errors, skipped,
                           first_errors=first, completions=len(texts), weights={fn.name: w for fn, w in rewards},
                           kind=family.name, form=form, reward=c.name if c is not None else names)
