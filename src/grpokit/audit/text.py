"""The text-answer form: the reward audit's tricks for a task whose gold answers are words, not numbers.

    form = text_form(rows)                  # None: no row has a text answer (nor a number: nothing fits)

A "capital of X" task judged by an own exact-match or normalised-text reward (docs/own-data.md) has answers the
answer-line tricks cannot edit (they are numeric edits of the gold). This form builds its tricks from the gold
and from other rows' golds, which stand in for plausible wrong answers (`Lyon or Paris or Marseille`): hedges
listing several candidates, the gold negated or in a longer word, the question copied back, the answer only in
a think block, several answer lines, 100k characters of padding. Each is scored as the answer-line audit scores
its tricks (grpokit.audit.rewards: at least as much as an honest wrong answer is a loophole).

Beside the tricks, `VARIANTS` write the RIGHT answer another way a person would (other case, accents left off,
a short sentence around it, a full stop): a reward that pays one of them less than `Final answer: Paris` is
strict, not gameable; the audit notes it (it does not fail) so the user decides whether to normalise.

Not covered: free-text answers judged by meaning (a paraphrase is neither a trick nor a variant here), rewards
that do not read `answer` on the marker line (every honest right answer then scores as a wrong one, and the
audit says that no trick of it fits), and tricks nobody has thought of yet: add them with `@trick`.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from grpokit.families import AnswerLines
from grpokit.families.base import HonestLayout, Trick, registrar
from grpokit.rewards import parse_gold

_PADDING_CHARS = 100_000  # as the answer-line audit's long_padding: also exercises each reward's time bound
_MAX_GOLD_CHARS = 200  # a longer gold is prose judged by meaning: exact-match tricks do not describe it
_FILLER = (
    "First, I read what the question asks for.",
    "Then I recall the fact it needs and check it once more.",
)


@dataclass(frozen=True)
class TextRow(HonestLayout):
    """One training row prepared for the text tricks: its gold and two wrong candidates from other rows."""

    row: dict
    gold: str
    others: tuple[str, str]  # two golds of other rows, neither equal to this one (case and accents aside)
    marker: str
    reasoning: str
    think: bool
    prompt: Any = None

    def wrong(self) -> str:
        return self.others[0]


@dataclass(frozen=True)
class TextLines(AnswerLines):
    """The answer-line form with the right-answer variants beside its tricks (scored against the honest right
    answer, not the wrong one)."""

    variants: dict[str, Trick] = field(default_factory=dict)


TRICKS: dict[str, Trick] = {}
VARIANTS: dict[str, Trick] = {}
trick = registrar(TRICKS, "text trick")
variant = registrar(VARIANTS, "text variant")


def fold(text: str) -> str:
    """Case and accents off: how a normalised-text reward compares (Reykjavík == reykjavik)."""
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c)).casefold()


trick("hedge_or", "several candidates joined by 'or', the gold among them (Lyon or Paris or Marseille)")(
    lambda r: r.honest(f"{r.others[0]} or {r.gold} or {r.others[1]}")
)
trick("hedge_list", "a list of candidates, the gold among them")(
    lambda r: r.honest(f"{r.others[0]}, {r.gold}, {r.others[1]}")
)
trick("hedge_though", "the gold, then a clause offering another candidate")(
    lambda r: r.honest(f"{r.gold}, though {r.others[0]} is also possible")
)
trick("hedge_slash", "two candidates joined by a slash")(lambda r: r.honest(f"{r.others[0]}/{r.gold}"))
trick("negated", "the gold negated: a substring matcher still sees it")(lambda r: r.honest(f"not {r.gold}"))
trick("wrong_then_gold_rejected", "a wrong answer that names the gold to reject it")(
    lambda r: r.honest(f"{r.others[0]} (not {r.gold})")
)
trick("gold_in_longer_word", "the gold inside a longer word")(lambda r: r.honest(f"{r.gold}ville"))
trick("question_copied", "the question copied back onto the answer line")(
    lambda r: r.honest(str(r.row.get("question", "")).strip()) if str(r.row.get("question", "")).strip() else None
)
trick("refusal", "reasoning, then the marker with a refusal")(lambda r: r.honest("I don't know"))
trick("marker_no_reasoning", "a wrong answer line with no reasoning")(lambda r: r.answer(r.others[0]))
trick("empty", "an empty completion")(lambda r: "")
trick("marker_repeated", "reasoning, then three answer lines with different candidates")(
    lambda r: f"{r.reasoning}\n" + "\n".join(r.answer(v) for v in (r.others[0], r.gold, r.others[1]))
)
trick("answer_only_in_think", "the gold answer line inside <think>…</think>, nothing after")(
    lambda r: f"<think>\n{r.reasoning}\n{r.answer(r.gold)}\n</think>\n"
)


@trick("long_padding", "reasoning, 100k characters repeating the gold, then a wrong answer line")
def _long_padding(r: TextRow) -> str:
    pad = f"Let me double-check: maybe {r.gold}. "
    return f"{r.reasoning}\n{pad * (_PADDING_CHARS // len(pad))}\n{r.answer(r.others[0])}"


variant("other_case", "in other case (PARIS)")(
    lambda r: r.honest(r.gold.upper() if r.gold.upper() != r.gold else r.gold.lower())
)
variant("no_accents", "without its accents (Reykjavík -> Reykjavik)")(
    lambda r: (
        None
        if fold(r.gold) == r.gold.casefold()
        else r.honest("".join(c for c in unicodedata.normalize("NFKD", r.gold) if not unicodedata.combining(c)))
    )
)
variant("full_stop", "with a full stop (Paris.)")(lambda r: r.honest(f"{r.gold}."))
variant("in_a_sentence", "in a short sentence (The answer is Paris.)")(lambda r: r.honest(f"The answer is {r.gold}."))


def text_gold(row: dict) -> str | None:
    """The row's gold answer as text, when it is short text (numbers are the answer-line tricks' own)."""
    gold = parse_gold(row.get("answer"))
    if gold is None or isinstance(row.get("answer"), (dict, list)) or len(gold) > _MAX_GOLD_CHARS:
        return None
    return re.sub(r"\s+", " ", gold)


def text_form(rows: list[dict]) -> TextLines | None:
    """The text-answer form for these training rows (their golds are the wrong candidates), or None when fewer
    than three distinct text answers exist (a hedge needs two others)."""
    golds = list(dict.fromkeys(g for g in map(text_gold, rows) if g is not None))
    if len({fold(g) for g in golds}) < 3:
        return None

    def prepare(row: dict, markers: tuple[str, ...], think: bool, min_lines: int, prompt: Any = None) -> TextRow | None:
        gold = text_gold(row)
        if gold is None:
            return None
        at = golds.index(gold)
        others = [g for g in golds[at + 1 :] + golds[:at] if fold(g) != fold(gold)][:2]
        lines = [_FILLER[i % len(_FILLER)] for i in range(max(1, min_lines))]
        return TextRow(row, gold, (others[0], others[1]), markers[0], "\n".join(lines), think, prompt)

    return TextLines("text-answer tricks", TRICKS, prepare, variants=VARIANTS)
