"""One answer's value, read: what `Final answer: ...` or a `\\boxed{}` states, as the math verifier compares it.

    clean_answer("$1,234.50 元")     # '1234.5'  the value's text, units, separators and LaTeX noise dropped
    parse_number("\\frac{1}{2}")      # Fraction(1, 2)
    classify_answer("38 或 39")       # 'hedge'   answer / refusal / hedge / empty / other

grpokit.rewards.math finds the answer in a completion (the answer lines, the last `</think>`, several candidates)
and compares it with the gold one; this module is what it reads each answer as. What is covered and what is not:
the docstring of grpokit.rewards.math, which states the verifier's whole contract.
"""
from __future__ import annotations

import functools
import re
import unicodedata
from decimal import Decimal
from fractions import Fraction

# A second candidate offered after the value, decided by shape ("18, though 19 is also possible"): math_clauses.py
from grpokit.rewards.math_clauses import NUMBER_TOKEN, offers_another
# math-verify (sympy) for symbolic answers, screened and bounded: math_symbolic.py
from grpokit.rewards.math_symbolic import symbolic_equal
from grpokit.rewards.parsing import MAX_ANSWER_CHARS, boxed_values

_MAX_ANSWER_CHARS = MAX_ANSWER_CHARS  # also bounds the symbolic path

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
# Text answers (no digit in the line: "Paris", "Reykjavík"): the hedges the text-answer audit writes
# (grpokit.audit.text) that hold no hedge word. A slash between two words of four letters or more ("Berlin/Paris";
# "km/h", "and/or", "TCP/IP" are one value), a list of three or more short items ("Berlin, Paris, Rome"; two items
# stay one value: "Paris, France", "Washington, D.C."), or another candidate called possible too. A unit in words
# over a slash ("miles/hour") reads as two candidates: as a whole answer line it is rare, and then costs the bonus.
_TEXT_SLASH = re.compile(r"[^\W\d_]{4,}\s*/\s*[^\W\d_]{4,}")
_TEXT_ALSO = re.compile(r"\b(?:also|equally|just\s+as)\s+(?:possible|plausible|likely|right|correct|valid)\b")
_TEXT_ITEMS = re.compile(r"\s*[,;、]\s*(?:and\s+|or\s+)?")
_TEXT_ITEM = re.compile(r"[^\W\d_][\w'’.-]*(?:\s+[^\W\d_][\w'’.-]*){0,2}")
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
TRAILING_PUNCT = " \t.。!！,，;；:：、?？"
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
# "9.8 m/s^2", "10 m^2", "2 s^-1", "9.8 m s^-2": a caret power of a unit written after a number is the unit's, dropped
# with it as "m²" is; "3x^2" (a variable glued to its number) and "x^2" (no number before it) stay expressions.
# A "*" glued between two unit symbols is a product of units ("3 N*m", "3 kg*m^2"), read as "·" is.
_POWER = r"\s*\^\s*\{?\s*[-+]?\d{1,2}(?:\s*\})?"
_UNIT_TERM = rf"[^\W\d_]+(?:{_POWER})?"
_UNIT_POWERS = re.compile(rf"(?<![\w.^])(\d+(?:\.\d+)?(?:[eE][-+]?\d{{1,2}})?)(\s*)"
                          rf"({_UNIT_TERM}(?:\s*(?:/|·|\*|\s)\s*{_UNIT_TERM})*)")
_UNIT_STAR = re.compile(r"(?<=[^\W_])\*(?=[^\W\d_])")
_LONE_VARIABLE = re.compile(r"[xyzabcnijk]")  # single letters read as variables (_GLUED_VARIABLE's, but "e")


def _unit_powers(m: re.Match) -> str:
    number, space, units = m.groups()
    if not ("^" in units or _UNIT_STAR.search(units)) or (not space and _GLUED_VARIABLE.match(units)):
        return m.group(0)
    units = re.sub(_POWER, "", units)
    if all(_LONE_VARIABLE.fullmatch(term) for term in re.split(r"[\s*·/]+", units.strip())):
        return number + space + units  # "5 a*b", "3 x*y": a product of variables, an expression, not units
    return number + space + _UNIT_STAR.sub("·", units)


# What may surround a lone number and still leave it a lone number: words (units,
# measure words, "x ="), currency, percent, degrees. Anything else (\sqrt, ^, +, ...) goes symbolic.
_WORDY = re.compile(r"[\w\s%=:'’¥￥€£°·]*")
# A slash between unit symbols is "per" ("12 m/s", "3 €/kg", "60 km/h"), not a division of the number.
_UNIT_SLASH = re.compile(r"(?<=[^\W\d_]|[€£¥$%°])\s*/\s*(?=[^\W\d_])")
# "4 kJ/(kg·K)": units over a bracketed product of units are "per" that product, not a trailing note in words.
_UNIT_PER_GROUP = re.compile(r"(?<=[^\W\d_])\s*/\s*\(\s*([^\W\d_]+(?:(?:\s*[·*]\s*|\s+)[^\W\d_]+)*)\s*\)")
# Scientific notation, read as the number it writes: "1.5e3", "1.5 × 10^3", "1.5 \times 10^{3}" (superscripts are
# "^{3}" by then). Exponents are bounded: 10^999 is not an answer, and its digits are not written out.
_SCIENTIFIC = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?:\s*[eE]\s*([+-]?\d{1,2})|\s*(?:×|\\times|\\cdot|·|\*|x)\s*10\s*"
                         r"\^\s*\{?\s*([+-]?\d{1,2})\s*\}?)(?![\w.])")
# "12 (or XIII)": a Roman numeral in what follows the value is a number too (two letters or more, a valid one).
_ROMAN = re.compile(r"(?<![\w])(?=[MDCLXVI]{2,}(?![\w]))M{0,3}(?:CM|CD|D?C{0,3})(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3})"
                    r"(?![\w])")
_ROMAN_VALUES = {"M": 1000, "D": 500, "C": 100, "L": 50, "X": 10, "V": 5, "I": 1}
_ROMAN_WHOLE = re.compile(r"(?=.)M{0,3}(?:CM|CD|D?C{0,3})(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3})")
# A one-letter Roman numeral is a number only beside an operator ("XII+I", "I × 12"): alone it is a word ("I").
_ROMAN_OPERAND = re.compile(r"(?<![\w])[MDCLXVI](?![\w])(?=\s*[-+*/×÷]\s*[\dMDCLXVI])|(?<=[-+*/×÷])\s*[MDCLXVI](?![\w])")
# Unicode's Roman numerals (Ⅻ, ⅩⅡ, ⅰⅴ): numbers whatever surrounds them, read before NFKC makes them letters.
_UNICODE_ROMAN = re.compile("[\u2160-\u2188]+")


def _roman_value(letters: str) -> int:
    digits = [_ROMAN_VALUES[c] for c in letters]
    return sum(-d if i + 1 < len(digits) and d < digits[i + 1] else d for i, d in enumerate(digits))


def _roman(m: re.Match) -> str:
    text = m.group(0)
    return text[: len(text) - len(text.lstrip())] + str(_roman_value(text.strip()))


def _unicode_roman(m: re.Match) -> str:
    letters = unicodedata.normalize("NFKC", m.group(0)).upper()
    return str(_roman_value(letters)) if _ROMAN_WHOLE.fullmatch(letters) else m.group(0)


def _scientific(m: re.Match) -> str:
    exp = int(m.group(2) if m.group(2) is not None else m.group(3))
    # Written out exactly as a decimal ("6.67e-5" -> "0.0000667"): the exponent is bounded to two digits.
    # math-verify is no help here: it reads "6.67e-5" as 6.67 and "1.2e3" as 1.2.
    return format(Decimal(m.group(1)).scaleb(exp), "f")
_GLUED_VARIABLE = re.compile(r"[xyzabcnijke]\b")  # "3x" is an expression; "3 x" or "5m" stay units
_OPERATOR = re.compile(r"[-+*/×÷^()\[\]{}\\=]")


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
    return _TRAILING_NOTE.sub("", t).strip(TRAILING_PUNCT)


@functools.lru_cache(maxsize=65_536)
def _split_clause(t: str) -> tuple[str, str]:
    """(value, explanation) of a cleaned answer line; the explanation is '' unless the line opens
    with a lone number (what GSM8K-style answers are) followed by a reason or a condition.

    Only the value is compared; what the explanation may not hold is `_clause_hedges`' job. The split
    depends on the text alone, never on the gold answer, so a line cannot be read two ways until one matches.
    """
    lhs, eq, rhs = t.partition("=")
    if eq and rhs.strip() and _lone_number(_numeric_text(lhs)) is not None:  # "2 km = 2000 m", "12 = 3 × 4"
        return lhs.strip(), "= " + rhs.strip()  # the value first, the rest restates it (or offers another)
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
    cleaned = _ROMAN_OPERAND.sub(_roman, _ROMAN.sub(_roman, _clean(clause)))
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
    rest = _WORD.sub(" ", clause).strip(TRAILING_PUNCT + "()")
    return bool(rest) and symbolic_equal(rest, head)


@functools.lru_cache(maxsize=65_536)  # called several times per answer; answers repeat across a group
def _clean(value: str) -> str:
    """Case-preserving normal form: NFKC, no `$`/markdown/LaTeX spacing, units unwrapped, no end punctuation."""
    t = _SUPERSCRIPT.sub(_superscripts, value) if _HAS_SUPERSCRIPT.search(value) else value
    t = _UNICODE_ROMAN.sub(_unicode_roman, t) if _UNICODE_ROMAN.search(t) else t
    t = unicodedata.normalize("NFKC", t).replace("−", "-").replace("’", "'")
    t = _UNIT_POWERS.sub(_unit_powers, t) if "^" in t or "*" in t else t
    t = t.strip()
    if t.startswith("\\boxed"):  # "\boxed{12}, though 13 is possible": the box's value, then what follows it
        inner = boxed_values(t, 1)
        if inner:
            t = inner[0][1] + t[t.index("{") + len(inner[0][1]) + 2:]
    t = _DEGREE.sub("°", t)
    t = _UNIT_SLASH.sub(" per ", _UNIT_PER_GROUP.sub(r" per \1", t)) if "/" in t else t
    t = _EMPHASIS.sub(r" \1 ", t) if "*" in t else t
    t = _LATEX_WRAPPERS.sub(r" \1", t)
    t = t.replace("\\%", "%")
    t = _LATEX_NOISE.sub(" ", t)
    t = " ".join(t.split())
    t = _SCIENTIFIC.sub(_scientific, t) if ("e" in t or "E" in t or "10" in t) else t
    return t.strip(TRAILING_PUNCT)


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
    if not _DIGIT.search(whole):
        text = _text_problem(whole, value)
        if text:
            return text
    if after and _clause_hedges(unit_head, after):
        return "hedge"  # "Final answer: 12" then "Though 13 is also possible."
    return ""


def _text_problem(t: str, raw: str) -> str:
    """'hedge' or 'several_answers' for a text answer line (no digit) that offers several candidates, else ''.
    `t` is the cleaned line, `raw` the line as written (cleaning reads a slash as "per", for units)."""
    if _TEXT_SLASH.search(raw) or _TEXT_ALSO.search(t.lower()):
        return "hedge"
    items = _TEXT_ITEMS.split(t.strip(TRAILING_PUNCT))
    if len(items) >= 3 and all(_TEXT_ITEM.fullmatch(i) for i in items):
        return "several_answers"
    return ""


def _several_numbers(t: str) -> bool:
    """'38, 39' or '38 39' or '3 apples and 5 pears': numbers with no operator between them."""
    tokens = list(NUMBER_TOKEN.finditer(t))
    return any(not _OPERATOR.search(t[a.end(): b.start()]) for a, b in zip(tokens, tokens[1:]))
