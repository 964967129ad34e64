"""Reward audit: try to game a combined reward before training does.

GRPO optimises whatever the reward really measures, loopholes included. For
each of a few training rows this module writes an honest right answer, an
honest wrong answer (same reasoning, wrong number) and a suite of tricks built
from the row itself (the answer-line form's `TRICKS`, grpokit.families.answer_lines: refusal with
the marker, hedges, a bare answer line, empty, the marker repeated, symbol
garbage, the answer only inside think, 100k characters of padding, the gold's
digits rearranged, the prompt's own worked example copied, ...). None of
the tricks solves the problem honestly, so a sound reward scores every one of
them strictly below the honest wrong answer; a trick that scores at least as
much is a loophole the policy can climb instead of learning the task.

`audit_rewards(rewards, rows)` is independent of recipes (testable alone); the
glue that picks the audit for a recipe (`audit_recipe`, `audit_warnings`) is
grpokit.audit.recipe, above this module and the other audits, which build on
what is here (TrickResult, score_all, TIE).

Rows whose gold answer is text ("Paris") get the text-answer tricks instead when no training row has a
numeric one (grpokit.audit.text: hedges listing other rows' answers, the question copied back, ...), and the
right answer written other ways (case, accents, a sentence) is scored against the honest right one: a note
where the reward pays it less. Where no trick fits (no row has an answer the tricks can be built from, or
the reward pays no honest right answer on the marker line), the audit says so and what to check by hand
(`NoTricks`, `HAND_CHECK`).

Not covered: with both kinds of answer, the text rows (skipped: the numeric tricks are edits of the gold),
free-text answers judged by meaning, and tricks nobody has thought of yet — add them to the form's
`TRICKS` (or give a family a form of its own).
"""
from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from grpokit.audit.text import text_form
from grpokit.families import ANSWER_LINES, AnswerLines
from grpokit.rewards import DEFAULT_MARKERS, RewardFunction, is_numeric_answer

DEFAULT_AUDIT_ROWS = 8  # enough to see a pattern; each row costs ~20 completions incl. one of 100k chars
TIE = 1e-9  # float tolerance: "at least as much" includes equal within rounding (every audit uses it)
# What to check by hand where no trick of the audit fits a reward: said by `rewards audit` and `train` alike.
HAND_CHECK = ("check it by hand: write a right answer, a wrong one and a hedge listing several candidates "
              "(`Lyon or Paris or Marseille`) in a JSONL file, score them with `grpokit rewards score --reward "
              "NAME --input FILE.jsonl`, and read samples.jsonl after the first training steps")


class NoTricks(ValueError):
    """No trick of the audit can be built from the recipe's rows: the message says why, `fix` what to check."""

    fix = HAND_CHECK


@dataclass
class TrickResult:
    name: str
    description: str
    rows: int = 0  # rows the trick applied to
    flagged_rows: int = 0  # rows where it scored >= the honest wrong answer
    scores: list[float] = field(default_factory=list)
    honest_wrong: list[float] = field(default_factory=list)
    example: str = ""  # the completion on the first flagged row (else the first row), shortened
    # Per reward (weighted), summed over the flagged rows: what the trick earns and what the honest wrong answer
    # earns from it, so a finding names the reward that pays for the trick (`culprits`).
    paid: dict[str, float] = field(default_factory=dict)
    paid_wrong: dict[str, float] = field(default_factory=dict)

    @property
    def mean(self) -> float:
        return sum(self.scores) / len(self.scores) if self.scores else 0.0

    @property
    def honest_wrong_mean(self) -> float:
        return sum(self.honest_wrong) / len(self.honest_wrong) if self.honest_wrong else 0.0

    def record(self, score: float, text: str, honest_wrong: float, flagged: bool, parts: dict | None = None,
               wrong_parts: dict | None = None) -> None:
        """One row's score of this trick against the row's honest wrong answer; `flagged` by the caller's rule.
        `parts` / `wrong_parts`: the same two scores per reward (weighted), for the breakdown of a flagged row."""
        self.rows += 1
        self.scores.append(score)
        self.honest_wrong.append(honest_wrong)
        if flagged:
            for name, value in (parts or {}).items():
                self.paid[name] = self.paid.get(name, 0.0) + value
                self.paid_wrong[name] = self.paid_wrong.get(name, 0.0) + (wrong_parts or {}).get(name, 0.0)
            if not self.flagged_rows:  # the first flagged row's completion replaces a first row's
                self.example = shorten(text)
            self.flagged_rows += 1
        elif not self.example:
            self.example = shorten(text)

    def culprits(self) -> list[tuple[str, float, float]]:
        """(reward, trick's mean, honest wrong's mean) per reward over the flagged rows: the rewards that pay the
        trick more than the honest wrong answer, most first; for a tie, those that pay it as much (not 0)."""
        n = max(1, self.flagged_rows)
        rows = [(name, self.paid[name] / n, self.paid_wrong.get(name, 0.0) / n) for name in self.paid]
        more = [r for r in rows if r[1] > r[2] + TIE]
        same = [r for r in rows if abs(r[1] - r[2]) <= TIE and abs(r[1]) > TIE]
        return sorted(more, key=lambda r: r[2] - r[1]) or same

    def headline(self) -> str:
        return (f"trick {self.name!r} ({self.description}) scores {self.mean:.2f}, an honest wrong answer "
                f"{self.honest_wrong_mean:.2f}, on {self.flagged_rows}/{self.rows} rows")


def paid_by(flagged: list[TrickResult], weights: dict[str, float]) -> list[str]:
    """Which reward pays for the flagged tricks, by how much over an honest wrong answer, and the fix: one entry
    per reward (the tricks it pays for listed), since one loose reward usually pays for many tricks."""
    by_reward: dict[str, list[tuple[str, float]]] = {}
    for t in flagged:
        for name, trick, wrong in t.culprits()[:1]:  # the one paying most for this trick
            by_reward.setdefault(name, []).append((t.name, trick - wrong))
    lines = []
    unpaid = [t.name for t in flagged if not t.culprits()]
    if unpaid:  # a tie no reward pays: the rewards cannot tell these from an honest attempt that failed
        names = ", ".join(unpaid[:6]) + (f", ... ({len(unpaid)} in all)" if len(unpaid) > 6 else "")
        lines.append(f"tied, paid by no reward: {len(unpaid)} trick(s) ({names}) score exactly what an honest wrong "
                     "answer scores; the rewards cannot tell them from a failed attempt")
        lines.append("  fix: if that matters (a refusal or a hedge as good as trying), add a format reward or a "
                     "penalty for them")
    for name, tricks in sorted(by_reward.items(), key=lambda kv: -len(kv[1])):
        most = max(d for _, d in tricks)
        names = ", ".join(n for n, _ in tricks[:6]) + (f", ... ({len(tricks)} in all)" if len(tricks) > 6 else "")
        pays = f"up to {most:+.2f} per row over an honest wrong answer" if most > TIE else \
            "as much as for an honest wrong answer"
        weight = weights.get(name)
        lines.append(f"paid by {name}: {pays}, for {len(tricks)} trick(s): {names}")
        lines.append(f"  fix: make {name} score these completions no higher than an honest wrong answer (it should "
                     "read only the final answer, and refuse one that offers a second candidate)"
                     + (f", or lower its weight ({weight:g})" if weight else ""))
    return lines


@dataclass
class AuditResult:
    """What an audit found, for every answer form: the answer-line audit here builds it as it is; the task audit
    (grpokit.audit.by_task) adds its form and correctness reward (`TaskAuditResult`), which change only the words."""

    tricks: list[TrickResult]
    rows: int  # rows audited
    honest_right: list[float | None]  # per row; None where the row has no reference answer (task forms)
    honest_wrong: list[float]
    errors: dict[str, int]  # reward name -> rows whose scoring raised
    skipped_rows: int = 0  # rows without what the tricks need (answer lines: a numeric gold answer)
    first_errors: dict[str, BaseException] = field(default_factory=dict)  # reward name -> its first row's error
    completions: int = 0  # completions scored by each reward
    weights: dict[str, float] = field(default_factory=dict)
    what: str = "answer-line tricks"  # the form's tricks, as the table names them
    skipped_why: str = "gold answer is not a number"
    # Right answers written another way (text answers: case, accents, a sentence) that score below the honest
    # right answer: notes, not findings (a strict reward is not a gameable one).
    variants: list[TrickResult] = field(default_factory=list)

    # The words of the table: a flagged trick scores at least as much as an honest wrong answer here (a format
    # reward pays honest layout, so a tie already earns a trick something); `TaskAuditResult` says "more than".
    beats = "at least as much as"
    none_beats = "as much as"

    @property
    def flagged(self) -> list[TrickResult]:
        return [t for t in self.tricks if t.flagged_rows]

    @property
    def right_not_preferred(self) -> int:
        """Rows where the honest right answer does not beat the honest wrong one: the reward is blind."""
        return sum(r is not None and r <= w + TIE for r, w in zip(self.honest_right, self.honest_wrong))

    @property
    def ok(self) -> bool:
        return not self.flagged and not self.right_not_preferred and not any(self.errors.values())

    @property
    def blind(self) -> bool:
        """The honest right answer beats the honest wrong one on no row: no trick of this audit fits the reward."""
        return bool(self.rows) and self.right_not_preferred == self.rows

    def strict_notes(self) -> list[str]:
        """One line per right-answer variant the reward pays less than the honest right answer, and the choice."""
        lines = []
        for v in self.variants:
            if v.flagged_rows:
                lines.append(f"note: a right answer written {v.description} scores {v.mean:.2f} against "
                             f"{v.honest_wrong_mean:.2f} on {v.flagged_rows}/{v.rows} rows (e.g. {v.example!r})")
        if lines:
            lines.append("  the reward refuses these right answers: if the model may write them so, normalise in "
                         "the reward (casefold, strip accents and punctuation, read only the answer line); "
                         "strict is not gameable, only slower to learn")
        return lines

    def findings(self) -> list[str]:
        return error_findings(self) + [t.headline() for t in self.flagged] + paid_by(self.flagged, self.weights)

    def head(self) -> list[str]:
        """The table's first lines: the honest scores, and the rows left out."""
        right = sum(self.honest_right) / max(1, len(self.honest_right))
        wrong = sum(self.honest_wrong) / max(1, len(self.honest_wrong))
        what = "" if self.what == "answer-line tricks" else f" ({self.what})"
        lines = [f"reward audit{what} on {self.rows} training row(s): honest right {right:.3f}, honest wrong "
                 f"{wrong:.3f}"]
        if self.skipped_rows:
            lines.append(f"({self.skipped_rows} row(s) skipped: {self.skipped_why})")
        return lines

    def blind_fix(self) -> str:
        return "check the answer markers and the correctness reward"

    def table(self) -> str:
        lines = self.head() + error_findings(self)
        if self.blind:  # every trick is judged against a wrong answer the reward cannot tell from a right one
            lines.append(f"the honest right answer does not beat the honest wrong one on any of {self.rows} row(s): "
                         f"no trick of this audit fits these rewards; {self.blind_fix()}")
            lines.append(f"  {HAND_CHECK}")
            return "\n".join(lines)
        if self.right_not_preferred:
            lines.append(f"the honest right answer does not beat the honest wrong one on {self.right_not_preferred} "
                         f"row(s): {self.blind_fix()}")
        if not self.flagged:
            lines.append(f"no trick scored {self.none_beats} an honest wrong answer ({len(self.tricks)} tried)")
            return "\n".join(lines + self.strict_notes())
        lines.append(f"{len(self.flagged)} trick(s) score {self.beats} an honest wrong answer:")
        header = ("trick", "rows", "trick mean", "wrong mean", "example")
        body = [
            (t.name, f"{t.flagged_rows}/{t.rows}", f"{t.mean:.3f}", f"{t.honest_wrong_mean:.3f}", t.example)
            for t in self.flagged
        ]
        widths = [max(len(r[i]) for r in [header, *body]) for i in range(4)]
        for r in [header, *body]:
            lines.append("  ".join(c.ljust(w) for c, w in zip(r[:4], widths)) + "  " + r[4])
        lines += paid_by(self.flagged, self.weights)  # who pays for the tricks, by how much, and the fix
        return "\n".join(lines + self.strict_notes())


def error_findings(result) -> list[str]:
    """Rewards that raised during the audit, counted, with the first error and its traceback: a finding (the
    audit fails), since training would score those completions null the same way."""
    lines = []
    for name, n in result.errors.items():
        if not n:
            continue
        total = f" of {result.completions}" if getattr(result, "completions", 0) else ""
        lines.append(f"reward {name!r} raised on {n}{total} completion(s) (scored null: left out of the sum, and in "
                     "training the same)")
        exc = getattr(result, "first_errors", {}).get(name)
        if exc is not None:
            lines += ["  " + line for line in short_traceback(exc)]
        lines.append(f"  fix: make {name} return a score (or None) for every completion; `grpokit rewards score "
                     f"--reward ... --input ROWS.jsonl` shows the error of each row")
    return lines


def short_traceback(exc: BaseException, frames: int = 4) -> list[str]:
    """The first error as a traceback a reader can act on: the frames outside grpokit (the user's own reward
    code), else the last few, then the error itself."""
    inside = str(Path(__file__).resolve().parents[1])
    stack = traceback.extract_tb(exc.__traceback__)
    own = [f for f in stack if not str(Path(f.filename).resolve()).startswith(inside)] or stack[-frames:]
    text = "".join(traceback.format_list(own[-frames:]) + traceback.format_exception_only(type(exc), exc))
    return ["Traceback (most recent call last, grpokit's frames left out):", *text.rstrip().splitlines()]


def collect_errors(errs: list) -> BaseException | None:
    """The exception behind the first of a reward's row errors (grpokit.rewards.registry.RowError), if any."""
    return getattr(errs[0], "exc", None) if errs else None


def shorten(text: str, limit: int = 60) -> str:
    flat = text.replace("\n", "\\n")
    return flat if len(flat) <= limit else f"{flat[:25]}…({len(text)} chars)…{flat[-25:]}"


def _reward_settings(rewards: list[tuple[RewardFunction, float]]) -> tuple[tuple[str, ...], bool, int]:
    """The recipe's own answer markers, thinking mode and reasoning-line minimum, so honest answers fit them."""
    markers: tuple[str, ...] = DEFAULT_MARKERS
    think, min_lines = False, 2
    for fn, _w in rewards:
        if fn.params.get("markers"):
            markers = tuple(fn.params["markers"])
        think = think or bool(fn.params.get("require_think"))
        min_lines = max(min_lines, int(fn.params.get("min_reasoning_lines", 0)))
    return markers, think, min_lines


def answer_form(rows: list[dict], form: AnswerLines = ANSWER_LINES) -> AnswerLines:
    """The form whose tricks fit these rows: `form`, or the text-answer form (grpokit.audit.text) when it is the
    answer-line one and no row has a numeric gold answer ("capital of X": tricks built from the rows' answers)."""
    if form is ANSWER_LINES and not any(is_numeric_answer(r.get("answer")) for r in rows):
        return text_form(rows) or form
    return form


def audit_rewards(
    rewards: list[tuple[RewardFunction, float]], rows: list[dict], max_rows: int = DEFAULT_AUDIT_ROWS,
    prompt_of: Callable[[dict], Any] | None = None, form: AnswerLines = ANSWER_LINES,
) -> AuditResult:
    """Score honest and adversarial completions for up to `max_rows` rows with the weighted sum of `rewards`.

    `prompt_of(row)`: the prompt training gives a row; rewards that read prompts get it (as TRL gives it), and
    the tricks that need it (`prompt_example_copied`) apply. Without it those tricks are skipped. `form`: the
    task family's answer-line form (default: grpokit.families.answer_lines'; when no row has a numeric gold
    answer, the text-answer form of grpokit.audit.text). NoTricks: no row fits any form."""
    markers, think, min_lines = _reward_settings(rewards)
    form = answer_form(rows, form)
    variants = getattr(form, "variants", {})
    prepared, skipped = [], 0
    for row in rows:
        if len(prepared) >= max_rows:
            break
        p = form.prepare(row, markers, think, min_lines, prompt_of(row) if prompt_of else None)
        if p is None:
            skipped += 1
        else:
            prepared.append(p)
    if not prepared:
        raise NoTricks("no trick of the audit fits this task: no training row has an answer in 'answer' they can "
                       "be built from (a number, or at least three distinct short text answers)")

    # One batch per reward: every completion of every row, with that row's columns alongside.
    texts: list[str] = []
    owners: list[tuple[int, str]] = []  # (row index, "right" | "wrong" | trick name)
    for i, r in enumerate(prepared):
        for kind, text in [("right", r.honest(r.gold)), ("wrong", r.honest(r.wrong()))] + [
            (t.name, t.build(r)) for t in form.tricks.values()
        ] + [(f"variant:{v.name}", v.build(r)) for v in variants.values()]:
            if text is not None:
                texts.append(text)
                owners.append((i, kind))
    keys = sorted({k for r in prepared for k in r.row})
    columns = {k: [prepared[i].row.get(k) for i, _ in owners] for k in keys}
    prompts = [prepared[i].prompt for i, _ in owners]
    totals, parts, errors, first = score_all(rewards, texts, columns, prompts if prompt_of is not None else None)

    by_row: list[dict[str, tuple[float, str, dict]]] = [{} for _ in prepared]
    for j, ((i, kind), total, text) in enumerate(zip(owners, totals, texts)):
        by_row[i][kind] = (total, text, {name: p[j] for name, p in parts.items()})
    results = {name: TrickResult(name, t.description) for name, t in form.tricks.items()}
    kept = {name: TrickResult(name, v.description) for name, v in variants.items()}
    for row_scores in by_row:
        right = row_scores["right"][0]
        for name, res in kept.items():  # a right answer written another way, against the honest right one
            if f"variant:{name}" in row_scores:
                score, text, _ = row_scores[f"variant:{name}"]
                res.record(score, text, right, flagged=score < right - TIE)
        wrong, _, wrong_parts = row_scores["wrong"]
        for name, res in results.items():
            if name not in row_scores:
                continue
            score, text, trick_parts = row_scores[name]
            res.record(score, text, wrong, flagged=score >= wrong - TIE,  # ties an honest wrong answer
                       parts=trick_parts, wrong_parts=wrong_parts)
    return AuditResult(
        tricks=[r for r in results.values() if r.rows],
        rows=len(prepared),
        honest_right=[s["right"][0] for s in by_row],
        honest_wrong=[s["wrong"][0] for s in by_row],
        errors=errors,
        skipped_rows=skipped,
        first_errors=first,
        completions=len(texts),
        weights={fn.name: w for fn, w in rewards},
        what=form.what,
        skipped_why="gold answer is not a number" if form is ANSWER_LINES else "no short text answer",
        variants=[v for v in kept.values() if v.rows],
    )


def score_all(rewards: list[tuple[RewardFunction, float]], texts: list[str], columns: dict, prompts: list | None):
    """Every reward on every completion: (weighted totals, weighted scores per reward, errors per reward, the
    first error's exception per reward). None (not applicable, or raised) adds nothing, as in TRL's nansum."""
    totals = [0.0] * len(texts)
    parts: dict[str, list[float]] = {}
    errors: dict[str, int] = {}
    first: dict[str, BaseException] = {}
    for fn, weight in rewards:
        given = {"prompts": prompts} if "prompts" in fn.extras and prompts is not None else {}
        scores, errs = fn.score_texts(texts, {**columns, **given})
        errors[fn.name] = len(errs)
        if collect_errors(errs) is not None:
            first[fn.name] = collect_errors(errs)
        parts[fn.name] = [0.0 if s is None else weight * s for s in scores]
        for j, s in enumerate(parts[fn.name]):
            totals[j] += s
    return totals, parts, errors, first
