"""One row of a question/answer dataset: which columns hold the question and the answer, a conversational
question's messages, and `normalize_row`, which turns a raw row into grpokit's (`question`, `answer`, the row's
own columns beside them) or says what is wrong with it. A row carrying a task family's own columns (its `layout`
in grpokit.families: a code row's tests, a JSON row's schema, a tool row's tools) is read in that family's layout
(HumanEval's own, as it is), whatever the task; a row some family judges without a gold answer needs none.

Reading and checking whole files (every row with its line, the report) is grpokit.data.io.
"""
from __future__ import annotations

import difflib
import json
import math

from grpokit.errors import Problem
from grpokit.families import judged_without_answer, layout_of
from grpokit.rewards import is_numeric_answer
from grpokit.templates import PLAIN_TEMPLATES

QUESTION_FIELDS = ("question", "prompt")
ANSWER_FIELDS = ("answer", "expected_answer")
# Column names that often hold the question / the gold answer in datasets found in the wild: the suggestion for a
# missing column when no column's name is close to the one looked for (difflib finds `problme` -> `problem`, but
# not `question` -> `problem`).
LIKELY_COLUMNS = {"question": ("problem", "input", "query", "instruction", "text", "prompt", "question"),
                  "answer": ("target", "solution", "output", "label", "gold", "expected_answer", "answer", "result")}
MESSAGE_ROLES = ("system", "user", "assistant", "tool")  # the roles of TRL's conversational format


def pick_field(obj: dict, preferred: str | None, fallbacks: tuple[str, ...]) -> str | None:
    if preferred:
        return preferred if preferred in obj else None
    return next((k for k in fallbacks if k in obj), None)


def answer_type(value) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        if "####" in value:
            return "gsm8k"
        return "numeric string" if is_numeric_answer(value) else "text"
    return type(value).__name__


def question_text(question: str | list[dict]) -> str:
    """A question for display: the text itself, or the last user message of a conversation."""
    if isinstance(question, str):
        return question
    users = [m.get("content", "") for m in question if isinstance(m, dict) and m.get("role") == "user"]
    return str(users[-1]) if users else json.dumps(question, ensure_ascii=False)


def question_key(question: str | list[dict]) -> str:
    """What makes two questions the same (duplicates, train/eval overlap): the text, or the whole conversation."""
    if isinstance(question, str):
        return question.strip()
    return json.dumps(question, ensure_ascii=False, sort_keys=True)


def _message_problems(msgs: list, where: str) -> list[Problem]:
    shape = 'write each message as {"role": "user", "content": "..."}'
    if not msgs:
        return [Problem(where, "the message list is empty", shape)]
    for i, m in enumerate(msgs, start=1):
        w = f"{where} message {i}"
        if not isinstance(m, dict) or "role" not in m or "content" not in m:
            return [Problem(w, f"not a message: {json.dumps(m, ensure_ascii=False)[:60]}", shape)]
        if m["role"] not in MESSAGE_ROLES:
            return [Problem(w, f"unknown role {m['role']!r}", f"use one of {', '.join(MESSAGE_ROLES)}")]
        if m["role"] == "system" and i > 1:
            return [Problem(w, "a system message after the first message",
                            "put the system message first (chat templates and served models expect it there)")]
        if not isinstance(m["content"], str):
            return [Problem(w, f"content must be a string, got {type(m['content']).__name__}",
                            "write the message text as a JSON string (content parts and images are not supported)")]
    if msgs[-1]["role"] != "user":
        return [Problem(f"{where} message {len(msgs)}", f"the last message is from {msgs[-1]['role']!r}, not the user",
                        "end the prompt with the user's message: the model's reply follows it")]
    if not any(m["content"].strip() for m in msgs if m["role"] == "user"):
        return [Problem(where, "every user message is empty", "fill in the question or delete the row")]
    return []


def normalize_row(obj: object, where: str, question_field: str | None = None,
                  answer_field: str | None = None, template: str | None = None) -> tuple[dict | None, list[Problem]]:
    """One raw row -> (normalised row or None, problems that make it unusable).

    `template` (a template name) refuses message-list questions under a plain template, which renders a string.
    A row in a family's own layout (grpokit.families: HumanEval's) is read in it; a row some family judges without
    a gold answer (tests, a schema) needs none. The family columns it carries are checked by the caller
    (grpokit.data.io.check_rows, grpokit.families.layout_problems).
    """
    qf_names = (question_field,) if question_field else QUESTION_FIELDS
    af_names = (answer_field,) if answer_field else ANSWER_FIELDS
    if not isinstance(obj, dict):
        return None, [Problem(where, f"row is a JSON {type(obj).__name__}, not an object",
                              'write one object per line: {"question": ..., "answer": ...}')]
    problems = []
    owner = layout_of(obj)
    if owner is not None and owner.layout.read is not None:  # HumanEval's own: prompt -> question + humaneval_prompt
        obj = owner.layout.read(obj, question_field)
    qk = pick_field(obj, question_field, QUESTION_FIELDS)
    ak = pick_field(obj, answer_field, ANSWER_FIELDS)
    q = obj.get(qk)
    if qk is None:
        problems.append(_missing(where, "question", qf_names, obj, answer_field or pick_field(obj, None, ANSWER_FIELDS)))
    elif isinstance(q, list):
        problems += _message_problems(q, f"{where} {qk}")
        if not problems and template in PLAIN_TEMPLATES:
            problems.append(Problem(f"{where} {qk}", f"the question is a list of messages; the {template} template "
                                    "renders a question string", "set data.template: chat (the tokenizer's chat "
                                    "template renders messages), or write the question as a string"))
    elif not isinstance(q, str):
        problems.append(Problem(f"{where} {qk}", f"question must be a string or a list of messages, "
                                f"got {type(q).__name__}", "write the question as a JSON string"))
    elif not q.strip():
        problems.append(Problem(f"{where} {qk}", "question is empty", "fill it in or delete the row"))
    if ak is None:
        if not judged_without_answer(obj):  # tests judge a code row, its schema a JSON row: a reference is optional
            problems.append(_missing(where, "answer", af_names, obj, qk))
    else:
        a = obj[ak]
        if a is None or isinstance(a, (bool, list, dict)):
            problems.append(Problem(f"{where} {ak}", f"answer must be a string or a number, got {json.dumps(a)[:40]}",
                                    'write the gold answer as a string, e.g. "72"'))
        elif isinstance(a, float) and not math.isfinite(a):
            what = "NaN" if math.isnan(a) else "infinite (Infinity, or a number beyond ±1.8e308 such as 1e400)"
            problems.append(Problem(f"{where} {ak}", f"answer is {what}, not a number a completion can match",
                                    'write the gold answer itself; as a string ("1e400") if it really is that'))
        elif isinstance(a, str) and not a.strip():
            problems.append(Problem(f"{where} {ak}", "answer is empty", "fill in the gold answer or delete the row"))
    if problems:
        return None, problems
    # Every column reaches the rewards under its own name (a reward may read `target`), and the question and
    # answer also as `question` / `answer` (what built-in rewards and TRL's prompt column are made from).
    row = dict(obj)
    row.pop("prompt", None)  # `prompt` is the rendered prompt column TRL reads; never pass a raw one through
    row["question"] = [dict(m) for m in q] if isinstance(q, list) else q
    if ak is not None:
        a = obj[ak]
        row["answer"] = a if isinstance(a, str) else (str(int(a)) if isinstance(a, float) and a.is_integer() else str(a))
    return row, []


def closest_column(what: str, looked_for: tuple[str, ...], columns, taken: str | None = None) -> str | None:
    """The column most likely meant for `what` (question / answer): the closest name to the one looked for
    (difflib), else a name such columns often have (LIKELY_COLUMNS); never `taken` (the other field's column)."""
    names = [c for c in columns if isinstance(c, str) and c != taken]
    for name in looked_for:
        close = difflib.get_close_matches(name, names, n=1)
        if close:
            return close[0]
    return next((c for c in LIKELY_COLUMNS[what] if c in names), None)


def _missing(where: str, what: str, looked_for: tuple[str, ...], obj: dict, taken: str | None) -> Problem:
    key = f"{what}_field"
    close = closest_column(what, looked_for, obj, taken)
    column = close or "COLUMN"
    fix = (f"did you mean {close!r}? " if close else f"rename a column to {what}, or ") + \
        f"name it: data.{key}: {column} in a recipe, --{key.replace('_', '-')} {column} for `grpokit data check`"
    return Problem(where, f"missing {what} (looked for {' / '.join(looked_for)}; the row has: "
                   f"{', '.join(map(str, obj)) or 'no columns'})", fix)


