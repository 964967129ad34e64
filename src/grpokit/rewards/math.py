"""Math answers: extract the final answer from a completion and compare it with the gold one.

This module is the single verifier used by the `math_correctness` reward and by
evaluation (`grpokit.evaluation`), so training and evaluation cannot drift apart.
`check_math` gives the verdict with its reason; `score_math` is its reward;
`extract_final_answer` + `answers_match` give the same answer in two steps.

Covered:
- answers after the LAST `</think>` only; an unclosed `<think>` gives no answer;
- answer lines `Final answer:`, `最终答案：`/`最终答案:` (case-insensitive; the
  value may sit on the next line) and `\\boxed{...}`; several candidates must
  all agree, otherwise there is no answer ("several answers");
- equivalence through whitespace, CJK and ASCII punctuation, full-width
  characters (NFKC), thousands separators, `$`, `$...$`/`\\(...\\)`, `\\text{}`
  units, trailing units and measure words (元 个 只 米 小时 km kg dollars ...),
  2.50 = 2.5, 1/2 = 0.5 = \\frac{1}{2}; a worked equation counts by its last
  side ("48 + 24 = 72"), a trailing note in words is dropped ("72 (in May)"); other forms (2\\sqrt{3} = \\sqrt{12},
  sets, expressions) through math-verify;
- an explanation after a lone number is not part of the value, as with
  math-verify alone: "18 (not counting the eggs she eats)", "$18 if she sells
  all the remaining eggs", "18 dollars, since she sells 9 eggs at $2", "18元，因为..." all state 18;
- a final answer is ONE value, optionally its unit, conversions of it and an explanation: what follows the
  value on its line, what follows a `\\boxed{}` on its line, and the lines right after the answer line (same
  paragraph, up to 3) may restate, convert or derive the value but not offer another one. Every number there
  must be the value, the value in another unit ("12 hours, i.e. 720 minutes"), a quantity of another known
  dimension ("18元，因为她每天卖9个鸡蛋"), part of a true equation ("18 — since 9 × 2 = 18") or an operand of a
  derivation that reaches the value ("12, which is 3 more than 9"); any other number is a second candidate
  and scores 0 ("hedge") in any language, whatever the words ("12, though 13 is possible", "12, that is 13",
  "12, aunque 13 también es posible", "12 (13 for 2 people)", "Final answer: 12" + "Though 13 is also
  possible."): math_clauses, by shape, no list of concession words (the audit tries this family,
  grpokit.audit.tricks.HEDGE_CLAUSES);
- no credit for refusals (不知道, I don't know ...), hedges in the value itself (`38 或 39`, `38, 39`, ranges
  including `38-40`, "about 39", "not 39"), doubt after it ("18, maybe less", "18 (approximately)"), or a
  number that only contains or is contained in the gold one (390 or 3 for 39: numbers are whole tokens);
- superscripts are powers: "4²" is 16, never 42 (NFKC alone would read "42"); after a letter ("12 m²") they
  belong to the unit; markdown emphasis is text ("12 *(13 also works)*");
- an expression compared with a number answer goes to math-verify only when math-verify reads all of it
  (`_plain_math`): it would read 12 from "12 \\overline{13}" or "12 \\to (13)" and skip the rest.

Bounded time and thread safety: the completion is scanned linearly, at most
`_MAX_CANDIDATES` answers are looked at, an answer longer than
`_MAX_ANSWER_CHARS` earns nothing, and math-verify runs with its SIGALRM
timeout disabled (it only works in the main thread) on screened input only
(`_symbolic_safe`: short, no exponent towers or huge factorials, which are
what can make sympy run for minutes).

Not covered: answers given only in words ("thirty-nine"), unit conversion between the answer and the gold
one (2 hours vs 120 minutes), percent vs fraction (50% vs 0.5), mixed numbers ("1 1/2"), answers with no marker
and no \\boxed, a second value in a condition with no punctuation ("39 if rounded down and 40 up" reads as 39;
only the first number is compared, so it earns what "39" alone earns), a second candidate in words ("39,
though forty is possible"), and what math_clauses lists as undecidable by shape: a premise named by a bare
number ("7, since she also eats 3") reads as a hedge (the conservative reading: a reward that pays a hedge
teaches hedging).
"""
from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass
from fractions import Fraction

# A second candidate offered after the value, decided by shape ("18, though 19 is also possible"): math_clauses.py
from grpokit.rewards.math_clauses import NUMBER_TOKEN, offers_another
# math-verify (sympy) for symbolic answers, screened and bounded: math_symbolic.py
from grpokit.rewards.math_symbolic import symbolic_equal, symbolic_parse
from grpokit.rewards.parsing import (DEFAULT_MARKERS, MAX_ANSWER_CHARS, MAX_CANDIDATES, answer_markers, answer_region,
                                     boxed_values)
from grpokit.rewards.parsing import answer_lines as _marker_values
from grpokit.rewards.registry import describe

_MAX_ANSWER_CHARS = MAX_ANSWER_CHARS  # also bounds the symbolic path
_MAX_CANDIDATES = MAX_CANDIDATES

_GSM8K_GOLD = re.compile(r"####\s*([^\n]+?)\s*$")

# Refusals: the article's "最终答案：不知道" earned a format bonus; here it is no answer at all.
_REFUSAL = re.compile(
    r"不知道|不清楚|不确定|无法确定|无法计算|无法判断|无法得出|无法回答|无法求|无法得知|不能确定|条件不足|信息不足|"
    r"没有足够|未知|没有答案|无答案|"
    r"\bi\s*(?:do\s*n[o']?t|don't|dont)\s+know\b|\bcannot\s+(?:be\s+)?determine|\bcan'?t\s+(?:be\s+)?determine|"
    r"\bcan\s?not\s+be\s+(?:determined|calculated|computed|known)|\bundetermined\b|\bunknown\b|\bnot\s+sure\b|"
    r"\bunsure\b|\bnot\s+enough\s+information\b|\binsufficient\b|\bunable\s+to\b|\bno\s+answer\b|\bn/a\b|^\?+$"
)
# Hedges: several values, an approximate value, or a conditional second value are not an answer.
# These count anywhere in the answer line, explanations included.
_UNCERTAIN = (
    r"或|还是|否则|\d\s*[到至]\s*-?\d|约|大概|左右|可能|也许|或许|上下|至少|最多|多于|少于|接近|差不多|不等于|猜|"
    r"\b(?:or|either|between|about|around|approximately|approx|roughly|nearly|almost|maybe|perhaps|probably|"
    r"possibly|likely|guess|least|most|more\s+than|less\s+than|fewer\s+than|up\s+to|neither|nor|"
    r"somewhere|otherwise|else|instead|alternatively|depending)\b|\d\s*to\s*-?\d|[~≈±∓–—…]|"
    r"\\(?:pm|mp|approx|sim|lor|neq|ne|leq|geq|le|ge)\b|[<>≤≥≠]|\.\.\."
)
# Negations and conditions: they qualify the value itself ("not 39", "39 if ...") unless they
# stand in an explanation after a lone number ("18 (not counting the eggs she eats)").
_QUALIFYING = r"不是|如果|若|以上|以下|\b(?:not|if|unless)\b"
_HEDGE = re.compile(f"{_UNCERTAIN}|{_QUALIFYING}")
# After the value, a second candidate is judged by shape (math_clauses.offers_another), not by words: "or",
# "more than", "between" may explain ("12 hours, or 720 minutes"; "3 more than 9"). Only words of doubt about the
# value itself stay, for the explanations that name no number ("18, maybe less", "18 (approximately)").
_CLAUSE_DOUBT = re.compile(
    r"约|大概|左右|可能|也许|或许|差不多|猜|\b(?:about|around|approximately|approx|roughly|nearly|almost|maybe|perhaps|"
    r"probably|possibly|likely|guess|somewhere|depending)\b|[~≈±∓…]|\\(?:pm|mp|approx|sim)\b|\.\.\."
)
# Where an explanation starts after a lone number: a parenthesis after a space ("72 (48 + 24)") or holding words,
# a comma, semicolon, 、, full stop or dash before a word ("$18. I hope it is correct."), or a connective ("18 dollars, since ...", "$18 if she sells ...").
# A comma before a number is not one ("71, 72" is a list).
_CLAUSE_START = re.compile(
    r"\s+\(|\s*\((?=[^()]*[^\W\d_])|\s*[,;、]\s*(?=[^\W\d_])|[.。!！]\s*(?=[^\W\d_])|\s+[—–]\s*(?=[^\W\d_])|"
    r"\s+(?=(?:if|unless|when|since|because|as|which|that|so|assuming|given|provided|after|before|from|for|"
    r"not\s+counting|excluding|including|hence|thus|therefore|i\.e\.|e\.g\.)\b)|"
    r"\s*(?=因为|由于|如果|假如|假设|所以|因此|不算|不包括|不含|包括|其中)",
    re.IGNORECASE,
)
# "38-40": a bare number minus a bare number is read as a range, not as unsimplified arithmetic
# (checked on the final side of an equation chain, so "16 - 3 - 4 = 9" is still the answer 9).
_RANGE = re.compile(r"(?<![\w.^{])\d+(?:\.\d+)?\s*-\s*\d+(?:\.\d+)?(?![\w.^}])")
# "72 clips (48 in April and 24 in May)": a trailing explanation in words is not part of the value.
_TRAILING_NOTE = re.compile(r"\s*\([^()]*[A-Za-z\u4e00-\u9fff][^()]*\)$")
_DIGIT = re.compile(r"\d")
_LATEX_WRAPPERS = re.compile(r"\\(?:text|textbf|textrm|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}")
_LATEX_NOISE = re.compile(r"\\[,;:! ]|\\left|\\right|\\displaystyle|\\\(|\\\)|\\\[|\\\]|\\\$|\$|\*\*|__|`")
_DEGREE = re.compile(r"\^\s*\{?\\circ\}?")
_FRAC = re.compile(r"\\[dt]?frac\s*\{\s*(-?\d+(?:\.\d+)?)\s*\}\s*\{\s*(\d+(?:\.\d+)?)\s*\}")
_FRAC_SHORT = re.compile(r"\\[dt]?frac\s*(\d)\s*(\d)")  # \frac12
_THOUSANDS = re.compile(r"(?<![\d.])(\d{1,3}(?:,\d{3})+)(?![\d])")
_TRAILING_PUNCT = " \t.。!！,，;；:：、?？"
# Markdown emphasis "*13*" is text, not "× 13 ×" for math-verify to parse around ("12 *(13 also works)*" paid).
_EMPHASIS = re.compile(r"(?<![\w*])\*(?=[^\s*])([^*\n]+?)(?<=[^\s*])\*(?![\w*])")
_DOLLAR_AMOUNT = re.compile(r"\$\s*\d")  # "$12" (LaTeX's "$12$" reads the same: harmless, both are 12)
# Superscript digits: NFKC would make "4²" the number 42; it is 4 to the power 2. After a letter they are a unit's
# exponent ("12 m²"), dropped with it.
_SUPERSCRIPT = re.compile(r"([\w)}]?)([⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺]+)")
_HAS_SUPERSCRIPT = re.compile(r"[⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺]")
_SUPERSCRIPT_DIGITS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")


def _superscripts(m: re.Match) -> str:
    base, exp = m.group(1), m.group(2).translate(_SUPERSCRIPT_DIGITS)
    if base and not (base.isdigit() or base in ")}"):
        return base  # "m²": the unit's exponent, not a number of the answer
    return f"{base}^{{{exp}}}"
# What may surround a lone number and still leave it a lone number: words (units,
# measure words, "x ="), currency, percent. Anything else (\sqrt, ^, +, ...) goes symbolic.
_WORDY = re.compile(r"[\w\s%=:'’¥￥€£]*")
_GLUED_VARIABLE = re.compile(r"[xyzabcnijke]\b")  # "3x" is an expression; "3 x" or "5m" stay units
_OPERATOR = re.compile(r"[-+*/×÷^()\[\]{}\\=]")


@dataclass(frozen=True)
class MathVerdict:
    """The outcome of checking one completion: reward, why, and what was compared."""

    reward: float | None  # 1.0 / 0.0, None when the gold answer cannot be parsed
    reason: str  # correct | wrong | no_answer | unclosed_think | several_answers | refusal | hedge | too_long | gold_unparseable
    predicted: str | None  # the extracted final answer (truncated), None when there is none
    gold: str | None  # the parsed gold answer


# ---------------------------------------------------------------- extraction


def answer_candidates(text: str, markers: tuple[str, ...] = DEFAULT_MARKERS) -> list[str] | None:
    """Every final answer the completion states, in order; None for an unclosed `<think>`."""
    found = _candidate_spans(text, markers)
    return None if found is None else [v for _, _, v in found[0]]


def _candidate_spans(text: str, markers: tuple[str, ...]) -> tuple[list[tuple[int, int, str]], str] | None:
    """(start, end, value) of each final answer in the answer region; a `\\boxed{}` outside an answer line keeps
    what follows it on its line ("\\boxed{12}, though 13 is possible"), up to the next answer: as the rest of the
    line for a number (its unit: "\\boxed{12} hours, i.e. 720 minutes"), after a "\\n" for an expression, whose
    words are no part of it ("\\boxed{2\\sqrt{3}} square units")."""
    region = answer_region(text)
    if region is None:
        return None
    lines = _marker_values(region, tuple(markers))
    boxed = boxed_values(region, _MAX_CANDIDATES - len(lines))
    # A \boxed inside an answer line is that line's value, not a second answer.
    boxed = [(s, v) for s, v in boxed if not any(a <= s < b for a, b, _ in lines)]
    starts = sorted([a for a, _, _ in lines] + [s for s, _ in boxed])
    spans = [(a, b, v) for a, b, v in lines]
    for s, v in boxed:
        close = region.find("{", s) + len(v) + 2  # after the box's closing brace
        eol = region.find("\n", close)
        stop = min([len(region) if eol < 0 else eol] + [a for a in starts if a > s])
        rest = region[close:stop][: max(0, _MAX_ANSWER_CHARS - len(v) - 8)].rstrip()  # within the bound
        sep = "" if parse_number(v) is not None or not rest.strip(_TRAILING_PUNCT + "$") else "\n"
        spans.append((s, stop, f"\\boxed{{{v}}}{sep}{rest}"))
    return sorted(spans), region


def extract_final_answer(text: str, markers: tuple[str, ...] = DEFAULT_MARKERS) -> str | None:
    """The completion's final answer, or None when there is none or its answers disagree.

    The lines right after the final answer (the same paragraph) come with it after a "\\n": they are part of the
    answer (`classify_answer` reads them), so "Final answer: 12" + "Though 13 is also possible." is not 12. An
    earlier answer that agrees but hedges ("\\boxed{12}, though 13 is possible" before "Final answer: 12") is
    the one returned, so that its hedge counts."""
    answer, _reason = _single_answer(text, tuple(markers))
    return answer


def _single_answer(text: str, markers: tuple[str, ...]) -> tuple[str | None, str]:
    found = _candidate_spans(text, markers)
    if found is None:
        return None, "unclosed_think"
    spans, region = found
    candidates = [v for _, _, v in spans]
    if not candidates:
        return None, "no_answer"
    if len(candidates) > _MAX_CANDIDATES:
        return None, "several_answers"
    keys = {_candidate_key(c) for c in candidates}
    if len(keys) > 1:
        return None, "several_answers"
    # Each answer with the lines after it, up to the next answer: a hedge between two answer lines that agree
    # ("Final answer: 12" / "Though 13 is also possible." / "Final answer: 12") counts too.
    full = []
    for i, (_, end, value) in enumerate(spans):
        after = _following_lines(region, end, spans[i + 1][0] if i + 1 < len(spans) else len(region))
        value = value.strip()
        full.append(value + ("\n" if "\n" not in value else " ") + after if after else value)
    return next((c for c in full[:-1] if classify_answer(c)), full[-1]), ""


_FOLLOWING_LINES = 3  # an answer's own explanation is a line or two; a new section starts after a blank line


def _following_lines(region: str, end: int, limit: int) -> str:
    """The lines after an answer that ends at `end`, before `limit` (the next answer), up to a blank line, a
    heading, a chat tag or a fence (a new section), bounded."""
    out: list[str] = []
    for line in region[end:min(limit, end + 2 * _MAX_ANSWER_CHARS)].split("\n")[1:_FOLLOWING_LINES + 1]:
        line = line.strip()
        if not line or line.startswith(("#", "<|", "</", "<think", "```")):
            break
        out.append(line)
    return " ".join(out)[:_MAX_ANSWER_CHARS]


def _candidate_key(value: str) -> object:
    value = value.partition("\n")[0]
    number = parse_number(value)
    return number if number is not None else clean_answer(value).lower()


# ------------------------------------------------------------ normalisation


@functools.lru_cache(maxsize=65_536)  # called several times per answer (classify, parse, compare)
def clean_answer(value: str) -> str:
    """The value an answer states: `_clean`, without an explanation after a lone number
    ("18 (not counting the eggs she eats)" -> "18"), then the last side of a worked equation
    ("48 + 24 = 72" -> "72") and without a trailing note in words."""
    return _value_of(_split_clause(_clean(value))[0])


def _value_of(t: str) -> str:
    lhs, eq, rhs = t.rpartition("=")
    if eq and _DIGIT.search(lhs):  # "x = 72" keeps its lead-in; a calculation gives way to its result
        t = rhs.strip()
    return _TRAILING_NOTE.sub("", t).strip(_TRAILING_PUNCT)


@functools.lru_cache(maxsize=65_536)
def _split_clause(t: str) -> tuple[str, str]:
    """(value, explanation) of a cleaned answer line; the explanation is '' unless the line opens
    with a lone number (what GSM8K-style answers are) followed by a reason or a condition.

    Only the value is compared; what the explanation may not hold is `_clause_hedges`' job. The split
    depends on the text alone, never on the gold answer, so a line cannot be read two ways until one matches.
    """
    m = _CLAUSE_START.search(t)
    if m is None or m.start() == 0:
        return t, ""
    head = t[: m.start()]
    if _lone_number(_numeric_text(_value_of(head))) is None:
        return t, ""
    return head, t[m.end():]


def _clause_hedges(head: str, clause: str) -> bool:
    """True when what follows the value `head` (on its line, or on the lines after it) doubts it or puts another
    value forward: a number that is not the value restated, converted or derived (math_clauses, by shape)."""
    if not clause:
        return False
    cleaned = _clean(clause)
    clause = cleaned.lower()
    if _CLAUSE_DOUBT.search(clause):
        return True
    value = parse_number(head)
    if not offers_another(_numeric_text(head), value, _numeric_text(clause)):
        return False
    return value is not None or not _restates(head, cleaned)


_WORD = re.compile(r"(?<![\\\w])[^\W\d_]{2,}(?!\w)|(?<![\\\w])[^\W\d_]\.")  # words, "i." "e.", not \sqrt


def _restates(head: str, clause: str) -> bool:
    """An expression answer restated in another form after it ("\\boxed{2\\sqrt{3}}, i.e. \\sqrt{12}"): the
    clause without its words is one expression math-verify finds equal to the answer."""
    rest = _WORD.sub(" ", clause).strip(_TRAILING_PUNCT + "()")
    return bool(rest) and symbolic_equal(rest, head)


@functools.lru_cache(maxsize=65_536)  # called several times per answer; answers repeat across a group
def _clean(value: str) -> str:
    """Case-preserving normal form: NFKC, no `$`/markdown/LaTeX spacing, units unwrapped, no end punctuation."""
    t = _SUPERSCRIPT.sub(_superscripts, value) if _HAS_SUPERSCRIPT.search(value) else value
    t = unicodedata.normalize("NFKC", t).replace("−", "-").replace("’", "'")
    t = t.strip()
    if t.startswith("\\boxed"):  # "\boxed{12}, though 13 is possible": the box's value, then what follows it
        inner = boxed_values(t, 1)
        if inner:
            t = inner[0][1] + t[t.index("{") + len(inner[0][1]) + 2:]
    t = _DEGREE.sub("", t)
    t = _EMPHASIS.sub(r" \1 ", t) if "*" in t else t
    t = _LATEX_WRAPPERS.sub(r" \1", t)
    t = t.replace("\\%", "%")
    t = _LATEX_NOISE.sub(" ", t)
    t = " ".join(t.split())
    return t.strip(_TRAILING_PUNCT)


def _numeric_form(value: str) -> str:
    return _numeric_text(clean_answer(value))


def _numeric_text(t: str) -> str:
    t = _FRAC.sub(r"\1/\2", t)
    t = _FRAC_SHORT.sub(r"\1/\2", t)
    return _THOUSANDS.sub(lambda m: m.group(1).replace(",", ""), t)


def parse_number(text: str) -> Fraction | None:
    """'1,234.50 dollars' -> Fraction(2469, 2); None unless the text is one number plus words."""
    if len(text) > _MAX_ANSWER_CHARS:  # not an answer; also keeps long text out of the caches
        return None
    return _parse_short_number(text)


@functools.lru_cache(maxsize=65_536)  # called for the candidates, the value, its head and the gold answer
def _parse_short_number(text: str) -> Fraction | None:
    return _lone_number(_numeric_form(text))


def _lone_number(t: str) -> Fraction | None:
    tokens = list(NUMBER_TOKEN.finditer(t))
    if len(tokens) != 1:
        return None
    m = tokens[0]
    before, after = t[: m.start()], t[m.end():]
    sign = ""
    if before.rstrip().endswith(("-", "+")):
        sign, before = before.rstrip()[-1], before.rstrip()[:-1]
    if not (_WORDY.fullmatch(before) and _WORDY.fullmatch(after)):
        return None
    if "%" in before or after.startswith(("'", "’")) or _GLUED_VARIABLE.match(after):
        return None  # "%5", "5'2" and "3x" are not plain numbers
    try:
        return Fraction(sign + m.group(0).replace(" ", ""))
    except (ValueError, ZeroDivisionError):
        return None


def classify_answer(value: str) -> str:
    """'' for a usable single answer, else why not: empty | too_long | refusal | hedge | several_answers.

    `value` is an answer line's value, optionally followed by "\\n" and the lines after it (`extract_final_answer`
    gives them): they are read as the rest of the answer, so they may explain it but not offer another one."""
    value, _, after = value.partition("\n")
    if len(value) > _MAX_ANSWER_CHARS:  # first: a 100k-char answer line is not normalised (nor cached)
        return "too_long"
    cleaned = clean_answer(value)
    if not cleaned:
        return "empty"
    whole = _clean(value)
    if _REFUSAL.search(whole.lower()) or (after and _REFUSAL.search(_clean(after).lower())):
        return "refusal"  # refusals anywhere in the answer, explanations and equations included
    head, clause = _split_clause(whole)  # hedges anywhere too, but an explanation may say "if" and "not"
    # The value with its currency sign, which cleaning drops with LaTeX's "$": "$12, i.e. 1200 cents".
    unit_head = f"${cleaned}" if _DOLLAR_AMOUNT.search(value) and "$" not in cleaned else cleaned
    if _HEDGE.search(head.lower()) or _RANGE.search(cleaned) or _clause_hedges(unit_head, clause):
        return "hedge"
    if _several_numbers(_numeric_form(value)):
        return "several_answers"
    if after and _clause_hedges(unit_head, after):
        return "hedge"  # "Final answer: 12" then "Though 13 is also possible."
    return ""


def _several_numbers(t: str) -> bool:
    """'38, 39' or '38 39' or '3 apples and 5 pears': numbers with no operator between them."""
    tokens = list(NUMBER_TOKEN.finditer(t))
    return any(not _OPERATOR.search(t[a.end(): b.start()]) for a, b in zip(tokens, tokens[1:]))


# --------------------------------------------------------------- comparison


def parse_gold(answer: object) -> str | None:
    """Gold answers may be GSM8K-style ('... #### 72'), numbers, or strings; None when empty."""
    if answer is None:
        return None
    text = str(answer)
    m = _GSM8K_GOLD.search(text)
    if m:
        text = m.group(1)
    text = text.strip()
    return text or None


@functools.lru_cache(maxsize=8192)
def _gold_form(gold: str) -> tuple[Fraction | None, str] | None:
    """(number, cleaned text) of a gold answer; None when it is not a parseable answer."""
    if len(gold) > _MAX_ANSWER_CHARS:
        return None
    number = parse_number(gold)
    cleaned = clean_answer(gold)
    if number is None and (not cleaned or symbolic_parse(cleaned) is None):
        return None
    return number, cleaned


def answers_match(predicted: str | None, gold: str) -> bool:
    """True when `predicted` (an extracted final answer) is equivalent to `gold` (see module docstring)."""
    return _compare(predicted, gold) == "correct"


def _compare(predicted: str | None, gold: str) -> str:
    form = _gold_form(gold)
    if form is None:
        return "gold_unparseable"
    if predicted is None:
        return "no_answer"
    problem = classify_answer(predicted)
    predicted = predicted.partition("\n")[0]  # the lines after the answer explain it; the value is on its line
    gold_number, gold_text = form
    pred_text = clean_answer(predicted)
    if problem == "several_answers" and gold_number is None:
        problem = ""  # a set or tuple gold answer ("1, 2") is compared as a whole
    if problem:
        return problem
    if pred_text.lower() == gold_text.lower():
        return "correct"
    pred_number = parse_number(predicted)
    if gold_number is not None and pred_number is not None:
        return "correct" if pred_number == gold_number else "wrong"
    if gold_number is not None and not _plain_math(pred_text):
        return "wrong"  # math-verify would read a part of it: "12 \\overline{13}", "12 \\to (13)" are not 12
    return "correct" if symbolic_equal(pred_text, gold_text) else "wrong"


# An expression compared with a number goes to math-verify only when math-verify reads all of it: digits,
# operators, brackets, single-letter variables and these commands. Anything else (\overline, \color, \tag,
# \to, "·", "⋯", words) math-verify may skip, keeping one number of several.
_MATH_COMMANDS = re.compile(r"\\(?:[dt]?frac|sqrt|cdot|times|div|pi|left|right)(?![a-zA-Z])")
_PLAIN_MATH = re.compile(r"(?:[\d\s.+\-*/^(){}\[\]=,]|(?<![a-zA-Z])[a-zA-Z](?![a-zA-Z]))*")


def _plain_math(text: str) -> bool:
    balanced = all(text.count(a) == text.count(b) for a, b in ("()", "{}", "[]"))
    return balanced and bool(_PLAIN_MATH.fullmatch(_MATH_COMMANDS.sub(" ", text)))


def check_math(completion: str, answer: object, markers: tuple[str, ...] = DEFAULT_MARKERS) -> MathVerdict:
    """The full verdict for one completion against one gold answer."""
    gold = parse_gold(answer)
    if gold is None or _gold_form(gold) is None:
        return MathVerdict(None, "gold_unparseable", None, gold)
    predicted, reason = _single_answer(completion, tuple(markers))
    if predicted is not None:
        reason = _compare(predicted, gold)
    reward = 1.0 if reason == "correct" else 0.0
    shown = None if predicted is None else predicted.partition("\n")[0][:_MAX_ANSWER_CHARS]
    return MathVerdict(reward, reason, shown, gold)


def score_math(completion: str, answer: object, markers: tuple[str, ...] = DEFAULT_MARKERS) -> float | None:
    return check_math(completion, answer, markers).reward


@describe(
    description="1.0 when the completion's single final answer (answer line or \\boxed{}, after any <think> block) "
    "is equivalent to the gold answer (numbers, fractions, units, LaTeX, symbolic via math-verify), else 0.0; "
    "refusals, hedges and several different answers score 0.0; null when the gold answer cannot be parsed.",
    columns=("answer",),
    params={"markers": "answer-line markers to look for, case-insensitive (default: Final answer:, 最终答案：, 最终答案:)"},
)
def get_math_correctness_reward(markers: list[str] | tuple[str, ...] = DEFAULT_MARKERS):
    r"""The `math_correctness` scorer: 1.0 for the gold answer, 0.0 for a wrong, hedged or refused one.

    Example:

    >>> from grpokit.rewards.math import get_math_correctness_reward
    >>> score = get_math_correctness_reward()
    >>> completions = ["18 - 3 = 15\nFinal answer: 15", "Final answer: 14", "Final answer: 15 or 16", "I don't know"]
    >>> score(completions, answer=["15"] * 4)
    [1.0, 0.0, 0.0, 0.0]
    >>> score(["Final answer: $1,225.00"], answer=["1225"])  # numbers are compared as numbers
    [1.0]
    >>> get_math_correctness_reward(markers=["Answer:"])(["Answer: 0.5"], answer=["1/2"])
    [1.0]
    """
    markers = answer_markers(markers)

    def score(completions: list[str], answer: list, **_columns) -> list[float | None]:
        return [score_math(c, a, markers) for c, a in zip(completions, answer)]

    def explain(completion: str, answer: object = None, **_row) -> dict:
        v = check_math(completion, answer, markers)
        return {"reward": v.reward, "reason": v.reason, "predicted": v.predicted, "gold": v.gold}

    score.explain = explain
    return score
