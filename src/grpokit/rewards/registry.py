"""The reward registry: rewards are looked up by name from a recipe.

A reward family registers a *factory* with `@register(...)`. The factory takes
the reward's params as keyword arguments (validated against its signature, so
a typo in a recipe's `params` is reported before any model loads) and returns
a *scorer*:

    scorer(completions: list[str], **columns) -> list[float | None]

`completions` are plain texts (chat-format completions are flattened to the
assistant's text before the scorer sees them); `columns` are the dataset
columns, one list per column, aligned with completions. A scorer returns
`None` only for rows the reward genuinely does not apply to (for example a
gold answer that cannot be parsed); it never swallows its own exceptions.

`build_reward(name, params)` wraps a scorer into a TRL reward function
(`f(prompts, completions, **kwargs)`) whose `__name__` is the reward name, so
TRL logs it as `rewards/<name>/mean`. The wrapper counts rows whose scoring
raised, logs them as `rewards/<name>/errors`, scores them `None` (NaN: left
out of the sum, not turned into 0) and raises once a whole batch fails.

This module does not define rewards itself; see the sibling modules.
"""
from __future__ import annotations

import inspect
import logging
from dataclasses import dataclass, field
from typing import Any, Callable

Scorer = Callable[..., list]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RewardSpec:
    name: str
    factory: Callable[..., Scorer]
    description: str  # what the reward checks, one or two sentences
    columns: tuple[str, ...]  # dataset columns it reads (besides the completion)
    params: dict[str, str] = field(default_factory=dict)  # param -> help text

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


REGISTRY: dict[str, RewardSpec] = {}


def register(name: str, *, description: str, columns: tuple[str, ...] = (), params: dict[str, str] | None = None):
    """Decorator: register a reward factory under `name`."""

    def deco(factory: Callable[..., Scorer]) -> Callable[..., Scorer]:
        if name in REGISTRY:
            raise ValueError(f"reward {name!r} registered twice")
        REGISTRY[name] = RewardSpec(name, factory, description, tuple(columns), dict(params or {}))
        return factory

    return deco


def _load_families() -> None:
    # Importing the family modules fills REGISTRY; kept in one place so that
    # `grpokit.rewards.registry` alone is enough to see every reward.
    from grpokit.rewards import families  # noqa: F401


def available() -> list[str]:
    _load_families()
    return sorted(REGISTRY)


def get_spec(name: str) -> RewardSpec:
    _load_families()
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown reward {name!r}; valid rewards: {', '.join(sorted(REGISTRY))}") from None


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


class RewardFunction:
    """A named, TRL-compatible reward function built from a registered scorer."""

    def __init__(self, name: str, scorer: Scorer, params: dict[str, Any]):
        self.__name__ = name
        self.name = name
        self.scorer = scorer
        self.params = params
        self.errors = 0  # rows whose scoring raised, over the whole run
        self.calls = 0

    def score_texts(self, texts: list[str], columns: dict[str, list]) -> tuple[list[float | None], list[str]]:
        """Score texts row by row; returns (scores, error messages per failed row)."""
        scores: list[float | None] = []
        errors: list[str] = []
        try:
            out = self.scorer(texts, **columns)
            if len(out) != len(texts):
                raise ValueError(f"reward {self.name!r} returned {len(out)} scores for {len(texts)} completions")
            return [None if s is None else float(s) for s in out], []
        except Exception as batch_error:  # noqa: BLE001 - re-scored row by row below to isolate the culprit
            log.debug("reward %s failed on the batch (%s); scoring row by row", self.name, batch_error)
        for i, text in enumerate(texts):
            row = {k: [v[i]] for k, v in columns.items()}
            try:
                (s,) = self.scorer([text], **row)
                scores.append(None if s is None else float(s))
            except Exception as e:  # noqa: BLE001 - counted, logged and reported, never turned into 0
                scores.append(None)
                errors.append(f"row {i}: {type(e).__name__}: {e}")
        return scores, errors

    def __call__(self, prompts=None, completions=None, **kwargs):
        log_metric = kwargs.get("log_metric")
        columns = {k: v for k, v in kwargs.items() if k not in _TRL_KWARGS}
        texts = [completion_text(c) for c in completions]
        scores, errors = self.score_texts(texts, columns)
        self.calls += 1
        self.errors += len(errors)
        if log_metric is not None:
            log_metric(f"rewards/{self.name}/errors", float(len(errors)))
        if errors:
            log.warning("reward %s raised on %d/%d completions: %s", self.name, len(errors), len(texts), errors[0])
            if len(errors) == len(texts):
                raise RuntimeError(f"reward {self.name!r} raised on every completion of the batch: {errors[0]}")
        return scores


def build_reward(name: str, params: dict[str, Any] | None = None) -> RewardFunction:
    spec = get_spec(name)
    params = dict(params or {})
    bad = spec.unknown_params(params)
    if bad:
        raise TypeError(f"reward {name!r} has no parameter(s) {bad}; valid: {sorted(spec.param_defaults())}")
    return RewardFunction(name, spec.factory(**params), params)
