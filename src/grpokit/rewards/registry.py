"""The reward registry: rewards are looked up by name from a recipe.

Every built-in reward is one row of `BUILTIN` below: its name, where its
factory lives (`module:function`, imported only when the reward is used, so
`grpokit rewards list` and recipe checks stay cheap) and its ROLE:

- `correctness`: checks the answer itself; its pass rate (score 1.0) is the
  task's primary metric (`metric` names it) and what health's hacking check
  compares the total reward with; a `graded` one scores a share of the answer
  (json_fields: the fields right), and its metric is its mean score instead;
- `format`: checks the layout (reasoning, one answer line); evaluation reports
  its rate, health watches it for collapse;
- `shaping`: nudges behaviour without judging the answer (length limits);
- `penalty`: only subtracts (a recipe's own rewards may declare it);
- `preference`: a learned score of people's preferences (`reward_model`): no
  pass rate, and it can be gamed, so the audit warns and health compares it
  with the rule rewards.

A factory carries its description, columns and params through `@describe(...)`
(next to its code). It takes the reward's params as keyword arguments
(validated against its signature, so a typo in a recipe's `params` is
reported before any model loads) and returns a *scorer*:

    scorer(completions: list[str], **columns) -> list[float | None]

`completions` are plain texts (chat-format completions are flattened to the
assistant's text before the scorer sees them); `columns` are the dataset
columns, one list per column, aligned with completions. A scorer that names a
`completion_ids` or `prompts` parameter also gets TRL's token ids / prompts. A
scorer returns `None` only for rows the reward genuinely does not apply to
(for example a gold answer that cannot be parsed); it never swallows its own
exceptions.

`build_reward(name, params)` wraps a scorer into a TRL reward function
(`f(prompts, completions, **kwargs)`) whose `__name__` is the reward name, so
TRL logs it as `rewards/<name>/mean`. The wrapper counts rows whose scoring
raised, logs them as `rewards/<name>/errors`, scores them `None` (NaN: left
out of the sum, not turned into 0) and raises once a whole batch fails, from
the first row's exception, so the traceback (run.json's error.traceback) goes
on into the reward's own code.
A recipe's own reward functions (`grpokit.rewards.own`) get the same wrapper.
"""
from __future__ import annotations

import importlib
import inspect
import logging
from dataclasses import dataclass, field
from typing import Any, Callable

from grpokit.errors import text_of
from grpokit.rewards.guard import OwnRewardCallError

Scorer = Callable[..., list]

log = logging.getLogger(__name__)

ROLES = ("correctness", "format", "shaping", "penalty", "preference")


@dataclass(frozen=True)
class Builtin:
    factory: str  # "module:function"
    role: str
    metric: str | None = None  # correctness rewards: what their pass rate is called
    reads: str = "any"  # the task family whose answers it reads (a key of grpokit.families.FAMILIES: math, code,
    # json, sql, tools, preference), or "any" completion; a recipe's family is the one its correctness reward reads
    refusals: bool = False  # its explain() can say a completion refused ("refusal"), for the refusal rate
    graded: bool = False  # its score is the share of an answer that is right (fields): its metric is the mean
    # score, not the share of rows scoring 1.0 (grpokit.task.TaskReward.metric_values)


# The one list of built-in rewards. Adding a reward: a module with a @describe'd factory, and a row here
# (docs/extending.md "A reward" walks through one).
BUILTIN: dict[str, Builtin] = {
    "math_correctness": Builtin("grpokit.rewards.math:get_math_correctness_reward", "correctness", "accuracy",
                                reads="math", refusals=True),
    "code_tests": Builtin("grpokit.rewards.code:get_code_tests_reward", "correctness", "pass@1", reads="code"),
    "json_schema": Builtin("grpokit.rewards.json_schema:get_json_schema_reward", "correctness", "valid rate",
                           reads="json"),
    "json_fields": Builtin("grpokit.rewards.json_fields:get_json_fields_reward", "correctness", "field accuracy",
                           reads="json", graded=True),
    "sql_exec": Builtin("grpokit.rewards.sql_exec:get_sql_exec_reward", "correctness", "execution match", reads="sql"),
    "countdown": Builtin("grpokit.rewards.countdown:get_countdown_reward", "correctness", "solve rate",
                         reads="countdown"),
    "format": Builtin("grpokit.rewards.format:get_format_reward", "format", reads="math"),
    "length": Builtin("grpokit.rewards.length:get_length_reward", "shaping"),
    # A learned reward (grpokit.rm): it judges the whole answer against people's rankings, so it is the task's
    # preference signal, not a checkable correctness; health compares it with the rule rewards (hacking).
    "reward_model": Builtin("grpokit.rewards.learned:get_reward_model_reward", "preference", reads="preference"),
    # The style the bundled rankings prefer, as a rule (brief, finished, no hedge, no brush-off): the form of a reply,
    # and next to reward_model with weight 0 a check the reward model did not produce.
    "direct_answer": Builtin("grpokit.rewards.direct_answer:get_direct_answer_reward", "format"),
    # Tool-calling episodes (grpokit.envs): they read the episode's messages, not an answer form of their own.
    "task_success": Builtin("grpokit.rewards.tools:get_task_success_reward", "correctness", "task success",
                            reads="tools"),
    "tool_choice": Builtin("grpokit.rewards.tools:get_tool_choice_reward", "format", reads="tools"),
    "tool_args": Builtin("grpokit.rewards.tools:get_tool_args_reward", "format", reads="tools"),
    "tool_shaping": Builtin("grpokit.rewards.tools:get_tool_shaping_reward", "shaping", reads="tools"),
}


@dataclass(frozen=True)
class RewardSpec:
    name: str
    factory: Callable[..., Scorer]
    description: str  # what the reward checks, one or two sentences
    columns: tuple[str, ...]  # dataset columns it reads (besides the completion)
    params: dict[str, str] = field(default_factory=dict)  # param -> help text
    role: str = "correctness"
    metric: str | None = None
    reads: str = "any"
    refusals: bool = False
    graded: bool = False

    def param_defaults(self) -> dict[str, Any]:
        sig = inspect.signature(self.factory)
        return {
            k: p.default for k, p in sig.parameters.items() if p.default is not inspect.Parameter.empty
        }

    def unknown_params(self, params: dict[str, Any]) -> list[str]:
        sig = inspect.signature(self.factory)
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values()):
            return []
        return [k for k in params if k not in sig.parameters]


def describe(*, description: str, columns: tuple[str, ...] = (), params: dict[str, str] | None = None):
    """Decorator: attach what `grpokit rewards list` shows to a reward factory (BUILTIN registers it by name)."""

    def deco(factory: Callable[..., Scorer]) -> Callable[..., Scorer]:
        factory.reward_info = {"description": description, "columns": tuple(columns), "params": dict(params or {})}
        return factory

    return deco


def available() -> list[str]:
    return sorted(BUILTIN)


def names_with_role(role: str) -> list[str]:
    return [n for n, b in BUILTIN.items() if b.role == role]


def names_reading(family: str) -> list[str]:
    """The built-ins that read the answers of task family `family` (`Builtin.reads`): `math` for the answer line's."""
    return [n for n, b in BUILTIN.items() if b.reads == family]


# What a task is scored by when nobody says (`grpokit eval MODEL` without --recipe): the math task, its answer line
# checked and its layout rewarded.
DEFAULT_REWARDS = ({"name": "math_correctness"}, {"name": "format"})
# Scored by a model, not a rule (role `preference`): the audit and health treat them as gameable.
LEARNED_REWARDS = tuple(names_with_role("preference"))


def get_spec(name: str) -> RewardSpec:
    try:
        entry = BUILTIN[name]
    except KeyError:
        raise KeyError(f"unknown reward {name!r}; valid rewards: {', '.join(sorted(BUILTIN))}") from None
    return _load_spec(name, entry)


_SPECS: dict[str, RewardSpec] = {}


def _load_spec(name: str, entry: Builtin) -> RewardSpec:
    if name not in _SPECS:
        module, _, attr = entry.factory.partition(":")
        factory = getattr(importlib.import_module(module), attr)
        info = factory.reward_info
        _SPECS[name] = RewardSpec(name, factory, info["description"], info["columns"], info["params"],
                                  entry.role, entry.metric, entry.reads, entry.refusals, entry.graded)
    return _SPECS[name]


def completion_text(completion: Any) -> str:
    """A completion as TRL passes it (str, or a list of chat messages) -> its text."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        return "".join(
            m.get("content", "") if isinstance(m.get("content", ""), str) else str(m.get("content"))
            for m in completion
            if isinstance(m, dict) and m.get("role", "assistant") == "assistant"
        )
    raise TypeError(f"completion must be a string or a list of chat messages, got {type(completion).__name__}")


_TRL_KWARGS = {"trainer_state", "log_extra", "log_metric", "completion_ids", "environments"}
_ROW_EXTRAS = ("prompts", "completion_ids")  # row-aligned TRL values a scorer may name as parameters
_CONTEXT = ("trainer_state", "log_metric", "log_extra", "environments")  # whole-batch TRL values, likewise


def _accepted(scorer) -> set[str]:
    try:
        return {p.name for p in inspect.signature(scorer).parameters.values()
                if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)}
    except (TypeError, ValueError):
        return set()


class RowError(str):
    """One row's error message (`row 3: KeyError: 'x' (my_rewards.py:7, in score)`) with the exception itself."""

    def __new__(cls, text: str, exc: BaseException | None = None):
        out = super().__new__(cls, text)
        out.exc = exc
        return out


def error_text(e: BaseException) -> str:
    """`KeyError: 'x'`, plus the user's file and line for an own reward's error, or the message alone for an own
    reward's broken contract (grpokit.rewards.guard), which names the function itself."""
    if isinstance(e, OwnRewardCallError):
        return str(e)
    try:  # the user's exception class decides what its attributes do
        where = e._grpokit_where
    except Exception:  # noqa: BLE001 - none, or one that cannot be read: the message without its line
        where = ""
    return f"{type(e).__name__}: {text_of(e)}{where if isinstance(where, str) else ''}"


class RewardFunction:
    """A named, TRL-compatible reward function built from a registered scorer."""

    def __init__(self, name: str, scorer: Scorer, params: dict[str, Any], spec: RewardSpec | None = None):
        self.__name__ = name
        self.name = name
        self.scorer = scorer
        self.params = params
        self.spec = spec
        self.extras = [k for k in _ROW_EXTRAS if k in _accepted(scorer)]
        self.context = [k for k in _CONTEXT if k in _accepted(scorer)]
        self.errors = 0  # rows whose scoring raised, over the whole run
        self.calls = 0

    def score_texts(self, texts: list[str], columns: dict[str, list],
                    context: dict | None = None) -> tuple[list[float | None], list[str]]:
        """Score texts row by row; returns (scores, error messages per failed row).

        Each message is a `RowError` (a str) whose `.exc` is the exception itself, so that a caller raising for
        it keeps the traceback into the reward's own code (an own reward's file and line). An error marked
        `whole_batch` (an own reward past its deadline: grpokit.rewards.guard) fails every row at once instead
        of being re-scored row by row (each row would wait out the deadline again)."""
        scores: list[float | None] = []
        errors: list[str] = []
        context = context or {}
        try:
            out = self.scorer(texts, **columns, **context)
            if len(out) != len(texts):
                raise ValueError(f"reward {self.name!r} returned {len(out)} scores for {len(texts)} completions")
            return [None if s is None else float(s) for s in out], []
        except Exception as batch_error:  # noqa: BLE001 - re-scored row by row below to isolate the culprit
            if getattr(batch_error, "whole_batch", False):
                return [None] * len(texts), [RowError(f"rows 0-{len(texts) - 1}: {error_text(batch_error)}",
                                                      batch_error)] * len(texts)
            log.debug("reward %s failed on the batch (%s); scoring row by row", self.name, batch_error)
        for i, text in enumerate(texts):
            row = {k: [v[i]] for k, v in columns.items()}
            try:
                (s,) = self.scorer([text], **row, **context)
                scores.append(None if s is None else float(s))
            except Exception as e:  # noqa: BLE001 - counted, logged and reported, never turned into 0
                scores.append(None)
                errors.append(RowError(f"row {i}: {error_text(e)}", e))
        return scores, errors

    def __call__(self, prompts=None, completions=None, **kwargs):
        log_metric = kwargs.get("log_metric")
        columns = {k: v for k, v in kwargs.items() if k not in _TRL_KWARGS}
        given = {"prompts": prompts, "completion_ids": kwargs.get("completion_ids")}
        columns.update({k: list(given[k]) for k in self.extras if given[k] is not None})
        context = {k: kwargs[k] for k in self.context if k in kwargs}
        # Tool rewards (rewards/tools.py) read each episode's messages and its environment (row-aligned, so
        # the row-by-row rescoring below hands each row its own), not flattened text.
        messages = getattr(self.scorer, "takes_messages", False)
        if messages and "environments" in kwargs:
            columns["environments"] = list(kwargs["environments"])
            context.pop("environments", None)
        texts = list(completions) if messages else [completion_text(c) for c in completions]
        scores, errors = self.score_texts(texts, columns, context)
        self.calls += 1
        self.errors += len(errors)
        if log_metric is not None:
            log_metric(f"rewards/{self.name}/errors", float(len(errors)))
        if errors:
            log.warning("reward %s raised on %d/%d completions: %s", self.name, len(errors), len(texts), errors[0])
            if len(errors) == len(texts):
                # `from`: the traceback in run.json (grpokit.run.safety.fail_run) then goes on into the reward's
                # own code, down to the user's file and line for an own reward.
                raise RuntimeError(f"reward {self.name!r} raised on every completion of the batch: {errors[0]}"
                                   ) from getattr(errors[0], "exc", None)
        return scores


def build_reward(name: str, params: dict[str, Any] | None = None) -> RewardFunction:
    r"""The built-in reward `name` with `params`, as a TRL reward function (`reward_funcs=[...]` of GRPOTrainer):
    called as TRL calls it, with the completions and the dataset's columns; TRL logs it as `rewards/<name>/mean`.

    Example:

    >>> from grpokit.rewards import build_reward
    >>> reward = build_reward("math_correctness", {"markers": ["Answer:"]})
    >>> reward.__name__
    'math_correctness'
    >>> reward(prompts=["2 + 3?", "2 + 3?"], completions=["2 + 3 = 5\nAnswer: 5", "Answer: 6"], answer=["5", "5"])
    [1.0, 0.0]
    >>> build_reward("math_correctness", {"marker": ["Answer:"]})
    Traceback (most recent call last):
    TypeError: reward 'math_correctness' has no parameter(s) ['marker']; valid: ['markers']
    """
    spec = get_spec(name)
    params = dict(params or {})
    bad = spec.unknown_params(params)
    if bad:
        raise TypeError(f"reward {name!r} has no parameter(s) {bad}; valid: {sorted(spec.param_defaults())}")
    return RewardFunction(name, spec.factory(**params), params, spec)
