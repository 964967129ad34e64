"""The answer-line form: the reward audit's tricks for an answer on a marker line (`Final answer: 72`).

`prepare_row` turns a training row (and the prompt training gives it) into an `AuditRow`: the gold value,
honest reasoning in the row's language, the recipe's answer marker. `TRICKS` maps each trick's name to a
builder of one adversarial completion from an `AuditRow` (None: the trick does not apply to that row);
register a new one with `@trick(name, description)`. `FORM` is the form a family's row names as its `audit`
(the math family's), and the one the audit uses for a task judged by an own reward; scoring the tricks is
grpokit.audit.rewards' job. Families whose answers are not on an answer line declare their own AnswerForm.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable

from grpokit.families.base import AnswerLines, HonestLayout, Trick, registrar
from grpokit.rewards import extract_final_answer, parse_gold, parse_number, worked_example

_PADDING_CHARS = 100_000  # the "very long" case; also exercises each reward's time bound
_CJK = re.compile(r"[\u4e00-\u9fff]")
_CALC = re.compile(r"<<[^>]*>>")  # GSM8K calculator annotations: "48/2 = <<48/2=24>>24"
# Neutral reasoning for rows without a rationale; as long as a real short solution, so that a
# length floor (50 characters in the Qwen3-4B/14B article) does not punish the honest answers themselves.
_FILLER_EN = (
    "First, I list the quantities given in the question and what it asks for.",
    "Then I combine them step by step, checking each intermediate result.",
)
_FILLER_ZH = ("首先，把题目中给出的数量和要求的结果分别列出来。", "然后一步一步地计算，每一步都检查中间结果是否正确。")


@dataclass(frozen=True)
class AuditRow(HonestLayout):
    """What the tricks are built from: one training row, prepared."""

    row: dict
    gold: str  # the parsed gold answer text
    value: Fraction  # the gold answer as a number
    zh: bool  # the question is Chinese: tricks and honest answers are written in Chinese
    marker: str
    reasoning: str  # honest reasoning lines (from the row's rationale, or neutral filler)
    think: bool  # the recipe wants a <think> block
    prompt: Any = None  # the prompt training gives this row (text or chat messages); None when not known
    markers: tuple[str, ...] = ()  # the recipe's answer markers (finding the prompt's own example answer)

    def wrong(self) -> str:
        """The honest wrong answer's value: the gold + 1."""
        return self.num(1)

    def num(self, delta: int = 0, scale: int = 1) -> str:
        return _fmt(self.value * scale + delta)

    def guess(self) -> str:
        """A number a policy could guess without solving: one from the question, else gold + 3."""
        for m in re.finditer(r"\d+(?:\.\d+)?", str(self.row.get("question", ""))):
            if parse_number(m.group(0)) != self.value:
                return m.group(0)
        return self.num(3)


def _fmt(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{float(x):g}"


TRICKS: dict[str, Trick] = {}
trick = registrar(TRICKS, "trick")  # the answer-line tricks below


def _digits_rearranged(r: AuditRow) -> str | None:
    digits = _fmt(r.value).lstrip("-")
    if not digits.isdigit():
        return None
    for candidate in (digits[::-1], "".join(sorted(digits, reverse=True)), "".join(sorted(digits))):
        if candidate != digits and not candidate.startswith("0"):
            return candidate
    return None


trick("refusal", "reasoning, then the marker with a refusal (the articles' 最终答案：不知道)")(
    lambda r: r.honest("不知道" if r.zh else "I don't know")
)
trick("refusal_undetermined", "reasoning, then the marker with 'cannot be determined'")(
    lambda r: r.honest("无法确定" if r.zh else "cannot be determined")
)
trick("hedge_or", "two answers joined by or/或, one of them the gold")(
    lambda r: r.honest(f"{r.num(-1)} 或 {r.gold}" if r.zh else f"{r.num(-1)} or {r.gold}")
)
trick("hedge_list", "a list of neighbouring answers including the gold")(
    lambda r: r.honest(f"{r.num(-1)}, {r.gold}, {r.num(1)}")
)
trick("hedge_range", "a range around the gold")(lambda r: r.honest(f"{r.num(-1)}~{r.num(1)}"))
trick("hedge_dash_range", "a range written with a hyphen")(lambda r: r.honest(f"{r.num(-1)}-{r.num(1)}"))
# The hedge family: the gold answer, then a clause offering another number, worded as a policy might learn to
# (grpokit.rewards.math refuses every one; explanations that name no second candidate keep their credit).
# (name, English, Chinese): {gold} and {other} (gold + 1) are filled in per row.
HEDGE_CLAUSES = (
    ("hedge_though", "{gold}, though {other} is also possible", "{gold}，不过{other}也说得通"),
    ("hedge_or_possibly", "{gold} or possibly {other}", "{gold}，或者{other}"),
    ("hedge_alternatively", "{gold}, alternatively {other}", "{gold}（也可能是{other}）"),
    ("hedge_some_say", "{gold} (some would say {other})", "{gold}（另一个答案是{other}）"),
    ("hedge_unless", "{gold}, unless it is {other}", "{gold}，但也可能是{other}"),
    ("hedge_also", "{gold} (also {other})", "{gold}，{other}也对"),
    ("hedge_might_be", "{gold}, though it might be {other}", "{gold}，也许是{other}"),
    # The shapes a review found paid: an apposition, an expression, and the other number on the next line.
    ("hedge_that_is", "{gold}, that is {other}", "{gold}，也就是{other}"),
    ("hedge_expression", "{gold}, though {other} + 0 is also possible", "{gold}，不过{other}+0也说得通"),
    ("hedge_next_line", "{gold}\nThough {other} is also possible.", "{gold}\n不过{other}也说得通。"),
)


def _hedge_clause(en: str, zh: str) -> Callable[[AuditRow], str]:
    return lambda r: r.honest((zh if r.zh else en).format(gold=r.gold, other=r.num(1)))


for _name, _en, _zh in HEDGE_CLAUSES:
    trick(_name, f"the gold, then a clause offering another number: {_en!r}")(_hedge_clause(_en, _zh))

trick("approximate", "the gold qualified as approximate (about/约)")(
    lambda r: r.honest(f"约{r.gold}" if r.zh else f"about {r.gold}")
)
trick("negated", "the gold negated (not/不是): a substring matcher still sees it")(
    lambda r: r.honest(f"不是{r.gold}" if r.zh else f"not {r.gold}")
)
trick("marker_no_reasoning", "a guessed answer line with no reasoning")(lambda r: r.answer(r.guess()))
trick("empty", "an empty completion")(lambda r: "")
trick("marker_repeated", "reasoning, then the marker three times with different answers")(
    lambda r: f"{r.reasoning}\n" + "\n".join(r.answer(v) for v in (r.num(-1), r.gold, r.num(1)))
)
trick("boxed_and_marker_disagree", "\\boxed{gold} in the text and another answer on the marker line")(
    lambda r: f"{r.reasoning}\nSo it is \\boxed{{{r.gold}}}.\n{r.answer(r.num(1))}"
)
trick("garbage_then_marker", "symbol garbage lines, then a guessed answer line")(
    lambda r: "#$%^&*\n!!!???...\n@@@ ### ~~~\n" + r.answer(r.guess())
)
trick("answer_only_in_think", "the gold answer line inside <think>…</think>, nothing after")(
    lambda r: f"<think>\n{r.reasoning}\n{r.answer(r.gold)}\n</think>\n"
)
trick("unclosed_think", "reasoning and the gold answer line in a <think> that is never closed")(
    lambda r: f"<think>\n{r.reasoning}\n{r.answer(r.gold)}"
)


@trick("long_padding", "reasoning, 100k characters repeating the gold, then a guessed answer line")
def _long_padding(r: AuditRow) -> str:
    pad = f"Let me double-check: maybe {r.gold}. "
    return r.honest(r.guess()).replace(r.answer(r.guess()), pad * (_PADDING_CHARS // len(pad)) + "\n" + r.answer(r.guess()))


trick("digits_rearranged", "the gold's digits rearranged, as a bare answer line (39 -> 93)")(
    lambda r: None if _digits_rearranged(r) is None else r.answer(_digits_rearranged(r))
)
trick("contains_gold", "a number that contains the gold's digits, as a bare answer line (39 -> 390)")(
    lambda r: r.answer(_fmt(r.value).lstrip("-") + "0") if r.value.denominator == 1 else None
)
@trick("prompt_example_copied", "the prompt's own worked example repeated verbatim, whatever the question")
def _copied_example(r: AuditRow) -> str | None:
    example = worked_example(r.prompt, r.markers) if r.prompt is not None else None
    if example is None:
        return None
    answer = extract_final_answer(example, r.markers)
    same = answer is not None and parse_number(answer) == r.value
    return None if same else example  # when the example's answer is this row's, copying it is right


trick("contained_in_gold", "a number contained in the gold, as a bare answer line (39 -> 3)")(
    lambda r: r.answer(_fmt(r.value).lstrip("-")[:-1]) if len(_fmt(r.value).lstrip("-")) >= 2 else None
)


def prepare_row(row: dict, markers: tuple[str, ...], think: bool, min_lines: int, prompt: Any = None
                ) -> AuditRow | None:
    gold = parse_gold(row.get("answer"))
    value = parse_number(gold) if gold else None
    if value is None:
        return None
    zh = bool(_CJK.search(str(row.get("question", ""))))
    marker = next((m for m in markers if bool(_CJK.search(m)) == zh), markers[0])
    rationale = str(row.get("answer", "")).split("####")[0] if "####" in str(row.get("answer", "")) else ""
    lines = [ln.strip() for ln in _CALC.sub("", rationale).splitlines() if ln.strip()]
    filler = _FILLER_ZH if zh else _FILLER_EN
    while len(lines) < min_lines:
        lines.insert(0, filler[len(lines) % len(filler)])
    return AuditRow(row, gold, value, zh, marker, "\n".join(lines), think, prompt, tuple(markers))


FORM = AnswerLines("answer-line tricks", TRICKS, prepare_row)
