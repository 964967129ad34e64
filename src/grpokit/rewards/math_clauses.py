"""A second answer offered in the explanation after a final answer's value: "18, though 19 is also possible".

    offers_another(numeric_clause, value)    # True: the clause names another number as a possible answer

grpokit.rewards.math splits an answer line into its value and an explanation ("18 dollars, since she sells 9
eggs at $2") and refuses explanations that hedge; this module is the part of that judgement that looks for
another candidate number however it is worded: a number of its own next to a word that concedes, weighs or
adds an alternative ("7, though 9 is also possible", "7 (some would say 9)", "7 (also 9)", "7，不过9也说得通").
Explanations name numbers too: without such a word, or inside a calculation ("since 9 × 2 = 18"), a number is
part of the reason, not a second answer. Words that only add ("also", "too", "as well") count unless they stand
in a reason given before them ("18, since she also eats 3").

Not covered: a candidate written in words ("though forty is possible"); the other way round, an explanation
that uses one of these words with a number of its own ("18, but she eats 3") counts as a hedge.
"""
from __future__ import annotations

import re
from fractions import Fraction

NUMBER_TOKEN = re.compile(r"(?:\d+(?:\.\d+)?|\.\d+)(?:\s*/\s*\d+(?:\.\d+)?)?")  # 72, 2.5, .5, 1/2
# Words that concede, weigh or name an alternative.
ALTERNATIVE = re.compile(
    r"\b(?:though|although|but|yet|however|whereas|while|alternative|alternatively|possible|possibly|could|might|"
    r"would|perhaps|maybe|probably|likely|unless|arguably|equally|another|plausible|valid|acceptable|correct|works?|"
    r"say|says|said|claim|claims|others?\s+(?:answer|answers|option|value|possibility|solution|result))\b|"
    r"但|不过|然而|或者|可能|也许|或许|要么|另|亦|同样|也",
    re.IGNORECASE,
)
# Words that only add ("also", "too", "as well") name a second answer, unless they stand in a reason given before
# them ("18, since she also eats 3").
_ADDITIVE = re.compile(r"\b(?:also|too|as\s+well)\b|还", re.IGNORECASE)
_REASON = re.compile(r"\b(?:since|because|as|for|given|so|hence|thus|therefore)\b|因为|由于|所以|因此", re.IGNORECASE)
# An operator next to a number makes it an operand of a calculation; a sign after a word ("though -9") does not.
_OPERAND_BEFORE = re.compile(r"(?:[*/×÷^]|[\d)]\s*[-+])\s*$")
_OPERAND_AFTER = re.compile(r"\s*[-+*/×÷^]\s*[\d(]")


def candidate_numbers(clause: str) -> list[Fraction]:
    """The numbers a clause states on their own: not the operands of a calculation ("9 × 2 = 18" gives 18)."""
    out = []
    for m in NUMBER_TOKEN.finditer(clause):
        before = clause[: m.start()]
        if _OPERAND_BEFORE.search(before) or _OPERAND_AFTER.match(clause, m.end()):
            continue
        sign = "-" if before.rstrip().endswith("-") else ""
        try:
            out.append(Fraction(sign + m.group(0).replace(" ", "")))
        except (ValueError, ZeroDivisionError):
            continue
    return out


def offers_another(clause: str, value: Fraction | None) -> bool:
    """True when the clause (lower-cased, fractions and thousands already normalised) offers a number other than
    `value` as an answer."""
    if ALTERNATIVE.search(clause) and any(n != value for n in candidate_numbers(clause)):
        return True
    reason = _REASON.search(clause)
    before_reason = clause[: reason.start()] if reason else clause  # "7 (also 9), since ..." still adds a 9
    return bool(_ADDITIVE.search(before_reason)) and any(n != value for n in candidate_numbers(before_reason))
