"""`direct_answer`: the style the bundled rankings prefer, as a rule: a brief, finished, direct reply, neither
padded, hedged nor curt. 1.0 when every check passes, else 0.0.

    rewards:
      - {name: reward_model, weight: 1.0, params: {path: runs/rm-style}}
      - {name: direct_answer, weight: 0.0}     # logged and evaluated, never trained on: a check on the learned one

The rankings in `builtin:preference/rankings.jsonl` order four kinds of reply
the same way on every prompt: a short, concrete, friendly answer first; the
same content padded out second; a hedge or refusal third; a curt, dismissive
line last. A reward model learns that order from 240 pairs and may learn it
wrongly (length alone, a phrase); this rule writes the order down, so a
policy trained on the reward model can be checked by something the reward
model did not produce. With weight 0 it steers nothing: a gap between a
rising learned score and a flat rule is the reward hacking it is there to show
(health's reward_hacking_suspected compares them during training).

The checks, in order (`explain` names the first that fails):
- `unfinished`: the text does not end a sentence (. ! ? or a closing quote):
  cut off at the length limit, or trailing off;
- `too_long`: more than `max_words` words (padding; the ranked best replies
  have 6 to 22);
- `too_short`: fewer than `min_words` words, or sentences that average under
  `min_sentence_words` words ("Sour. Obviously."): curt fragments;
- `hedge`: a refusal or a hedge instead of an answer ("I cannot really say",
  "as an AI", "please ask a doctor", "it is hard to say", "subjective");
- `dismissive`: a brush-off ("whatever", "obviously", "google it", "next question");
- `filler`: padding phrases ("basically", "in general", "is something that",
  "a lot of different", "you will want to", "and then after that").

What it does not judge: whether the answer is right or helpful beyond its
form. The phrase lists are English and short on purpose: they are what the
rankings penalise, written down, not a classifier. On the bundled rankings the rule
passes every best reply and fails every other one (tests/test_preference.py).
"""
from __future__ import annotations

import re
from collections import Counter

from grpokit.rewards.registry import describe

# A refusal or a hedge in place of an answer; "I can't make it" (a quoted reply the user asked for) is no refusal,
# so the verbs that follow "I cannot" are the ones of declining to answer.
_HEDGE = re.compile(
    r"\bas an ai\b|\bi (?:cannot|can't|can not|am not able to|'m not able to|am unable to|'m unable to)"
    r"(?: really)? (?:say|know|give|recommend|suggest|help|describe|explain|be sure|tell|pick|advise|answer|cook)\b"
    r"|\bi (?:do not|don't) know\b|\bi (?:would|'d) (?:rather|prefer) not\b|\bi would not want\b|\bprefer not to\b"
    r"|\bi (?:am|'m) (?:not sure|unsure)\b|\bi do not (?:think i should|feel able)\b|\bhard to say\b|\bsubjective\b"
    r"|\bmay or may not\b|\binappropriate for me\b|\bi(?: would|'d) leave (?:that|it|this) to\b|\b(?:ask|consult|see|talk to) (?:a|your) (?:doctor|professional)\b",
    re.IGNORECASE)
_DISMISSIVE = re.compile(r"\bwhatever\b|\bobviously\b|\bgoogle it\b|\blook it up\b|\bnext question\b|\bnot hard\b"
                         r"|\bthat is enough\b|\bthey are all the same\b|\bworks for everyone\b", re.IGNORECASE)
_FILLER = re.compile(r"\bbasically\b|\bin general\b|\bis something (?:that|many)\b|\bwhich is something\b"
                     r"|\ba lot of different\b|\bmany, many\b|\ba great number of\b|\bamong the many\b"
                     r"|\byou will (?:first )?want to\b|\band then after that\b|\bit really depends\b"
                     r"|\bdepends on (?:a lot of|many)\b|\bkinds? of things\b", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?][\"'”’)\]]*$")
_SENTENCES = re.compile(r"[^.!?]+[.!?]*")
_WORD = re.compile(r"\w")
_LONG_WORD = re.compile(r"[a-z]{4,}")

_REPEATS = 3  # one word of 4+ letters this often ("road bikes and mountain bikes and city bikes") pads a reply
CHECKS = ("unfinished", "too_long", "too_short", "repetitive", "hedge", "dismissive", "filler")


def failed_check(text: str, min_words: int = 5, max_words: int = 25, min_sentence_words: float = 4.0) -> str | None:
    """The first check (CHECKS) `text` fails, or None when it is the kind of reply the rankings put first."""
    text = text.strip()
    words = text.split()
    if not words or not _SENTENCE_END.search(text):
        return "unfinished"
    if len(words) > max_words:
        return "too_long"
    sentences = [s for s in _SENTENCES.findall(text) if _WORD.search(s)]  # a closing quote is no sentence
    if len(words) < min_words or len(words) / max(1, len(sentences)) < min_sentence_words:
        return "too_short"
    counts = Counter(_LONG_WORD.findall(text.lower()))
    if counts and max(counts.values()) >= _REPEATS:
        return "repetitive"
    for name, pattern in (("hedge", _HEDGE), ("dismissive", _DISMISSIVE), ("filler", _FILLER)):
        if pattern.search(text):
            return name
    return None


@describe(
    description="1.0 when the completion is a brief, finished, direct reply (min_words..max_words words, ends a "
    "sentence, no hedge or refusal, no brush-off, no padding phrases), else 0.0: the style the bundled preference "
    "rankings put first, as a rule. Give it weight 0 next to reward_model to check the learned reward.",
    params={
        "min_words": "fewer words is a curt reply (default 5)",
        "max_words": "more words is a padded one (default 25)",
        "min_sentence_words": "sentences averaging fewer words are fragments (default 4)",
    },
)
def get_direct_answer_reward(min_words: int = 5, max_words: int = 25, min_sentence_words: float = 4.0):
    """The `direct_answer` scorer: 1.0 for a finished answer of `min_words`-`max_words` words with no hedge,
    brush-off or padding (the bundled rankings' order written as a rule), else 0.0.

    Example:

    >>> from grpokit.rewards.direct_answer import get_direct_answer_reward
    >>> score = get_direct_answer_reward()
    >>> score(["Put the egg in boiling water for 9 minutes, then cool it in cold water.",
    ...        "As an AI, I cannot cook, but some people say eggs can be boiled.", "Just boil it."])
    [1.0, 0.0, 0.0]
    """
    if not 1 <= min_words <= max_words:
        raise ValueError(f"direct_answer: need 1 <= min_words <= max_words, got {min_words} and {max_words}")
    settings = dict(min_words=min_words, max_words=max_words, min_sentence_words=min_sentence_words)

    def score(completions: list[str], **_columns) -> list[float]:
        return [0.0 if failed_check(c, **settings) else 1.0 for c in completions]

    def explain(completion: str, **_row) -> dict:
        failed = failed_check(completion, **settings)
        return {"reward": 0.0 if failed else 1.0, "reason": failed or "direct",
                "words": len(completion.split())}

    score.explain = explain
    return score
