"""A task: what a recipe asks the model to do and how it is judged, built once and shared.

    task = Task.from_recipe(recipe)
    task.rewards            # each reward built as training builds it: function, weight, role
    task.correctness        # the first reward with the `correctness` role (None: nothing checks the answer)
    task.primary_metric     # "accuracy" (math), "pass@1" (code_tests), "valid rate", "execution match", ...
    task.metric_values(s)   # {metric: per-row values} of every correctness reward, the primary first
    task.generation         # max_new_tokens, temperature, top_p
    task.family             # its task family (grpokit.families): what its rows need, its tricks, its columns
    task.rows()             # (train rows, held-out rows, notes), loaded on first use

Train, preflight, evaluation, the reward audit and the report read rewards
through the task and ask for a ROLE (registry.ROLES), never for a reward by
name, so a code, JSON, SQL or own-reward task is trained, checked and
evaluated with its own rewards. Building a task loads no model and no data.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from grpokit.data import load_datasets
from grpokit.errors import GrpokitError
from grpokit.families import family_of
from grpokit.rewards import (
    DEFAULT_ROLE,
    OwnRewardError,
    RewardFunction,
    RewardSpec,
    build_own,
    build_reward,
    builtin_of,
    is_own,
    names_with_role,
    reward_label,
)
from grpokit.templates import PromptTemplate

PASS_SCORE = 1.0  # a correctness reward's "right": 1.0 (code_tests: every test passed; fraction mode scores less)
_EPS = 1e-9


def reward_role(rc) -> str:
    """A recipe reward entry's role: a built-in's is its row's in the reward table, an own function's its entry's
    `role` (default DEFAULT_ROLE). The one rule: a built task (Task.from_recipe) and reward_roles both use it."""
    builtin = builtin_of(rc)
    return builtin.role if builtin is not None else (rc.role or DEFAULT_ROLE)


def reward_roles(reward_configs) -> dict[str, str]:
    """{logged name: role} of a recipe's reward entries, without building them (health, doctor, refill)."""
    return {reward_label(rc): reward_role(rc) for rc in reward_configs}


def template_of(recipe) -> PromptTemplate:
    return PromptTemplate(recipe.data.template, recipe.data.system_prompt, recipe.model.enable_thinking)


@dataclass(frozen=True)
class Generation:
    max_new_tokens: int
    temperature: float
    top_p: float


@dataclass
class TaskReward:
    name: str  # as logged: rewards/<name>/mean
    fn: RewardFunction
    weight: float
    role: str
    spec: RewardSpec

    def passes(self, scores: list[float | None]) -> list[bool | None]:
        return [None if s is None else s >= PASS_SCORE - _EPS for s in scores]

    @property
    def metric(self) -> str:
        return self.spec.metric or f"{self.name} pass rate"

    def metric_values(self, scores: list[float | None]) -> list[float | None]:
        """Per row, what the reward's metric averages: the score itself for a graded reward (the share of the
        fields right), else 1.0 / 0.0 for a pass (a score of 1.0) or not; None where it does not apply."""
        if self.spec.graded:
            return [None if s is None else float(s) for s in scores]
        return [None if p is None else float(p) for p in self.passes(scores)]


@dataclass
class Task:
    recipe: object
    template: PromptTemplate
    rewards: list[TaskReward]
    generation: Generation
    _rows: tuple | None = field(default=None, repr=False)

    @classmethod
    def from_recipe(cls, recipe) -> "Task":
        base = Path(recipe.source).parent if recipe.source else Path.cwd()
        rewards = []
        for i, rc in enumerate(recipe.rewards):
            if rc.path is not None or is_own(rc.name):
                try:
                    fn = build_own(rc, base, f"rewards.{i}")
                except OwnRewardError as e:
                    raise GrpokitError([e.problem]) from None
            else:
                fn = build_reward(rc.name, rc.params)
            rewards.append(TaskReward(fn.name, fn, rc.weight, reward_role(rc), fn.spec))
        t = recipe.train
        return cls(recipe, template_of(recipe), rewards, Generation(t.max_completion_length, t.temperature, t.top_p))

    @classmethod
    def of(cls, recipe_or_task) -> "Task":
        return recipe_or_task if isinstance(recipe_or_task, Task) else cls.from_recipe(recipe_or_task)

    # ------------------------------------------------------------ roles
    def by_role(self, role: str) -> list[TaskReward]:
        return [r for r in self.rewards if r.role == role]

    @property
    def roles(self) -> dict[str, str]:
        return {r.name: r.role for r in self.rewards}

    @property
    def correctness(self) -> TaskReward | None:
        return next(iter(self.by_role("correctness")), None)

    @property
    def format(self) -> TaskReward | None:
        return next(iter(self.by_role("format")), None)

    @property
    def primary_metric(self) -> str | None:
        c = self.correctness
        return None if c is None else c.metric

    def metric_values(self, scores: dict[str, list]) -> dict[str, list[float | None]]:
        """{metric: per-row values} of every correctness reward, the primary first, from `score`'s scores: a JSON
        task reports its field accuracy and its valid rate. Names are distinct: a recipe's rewards are (recipe
        checks), the built-ins' metrics are, and an own reward's is its name's pass rate."""
        return {r.metric: r.metric_values(scores[r.name]) for r in self.by_role("correctness")}

    def measured(self) -> str | None:
        """What evaluation can and cannot say, when no reward checks the answer; None when one does."""
        if self.correctness is not None:
            return None
        names = ", ".join(f"{r.name} ({r.role})" for r in self.rewards)
        return (f"no reward of this task has the correctness role ({names}): evaluation measures the mean of each "
                "reward, the format rate, mean length and cut-off share, but no accuracy or pass rate and no best "
                f"checkpoint. Fix: add a correctness reward ({', '.join(names_with_role('correctness'))}) "
                "or give your own reward `role: correctness`")

    @property
    def family(self):
        """The task family its correctness (else preference) reward reads (grpokit.families.Family), None for an
        own reward."""
        return family_of(self.recipe.rewards)

    # ------------------------------------------------------------ data and scoring
    def rows(self) -> tuple[list[dict], list[dict], list[str]]:
        if self._rows is None:
            self._rows = load_datasets(self.recipe)
        return self._rows

    def prompt_of(self, row: dict):
        """The prompt training gives a row (TRL's `prompt` column): the template's rendering of its question."""
        return self.template.build(row["question"])

    def score(self, texts: list[str], rows: list[dict], prompts: list | None = None
              ) -> tuple[dict[str, list], dict[str, int]]:
        """Every reward's scores on `texts` (aligned with `rows`), and the rows each reward raised on.

        Rewards that read prompts get `prompts`, by default each row's prompt as training renders it (the
        template's messages for its question), so evaluation and preflight score as TRL does in training."""
        columns = {k: [r.get(k) for r in rows] for k in rows[0]} if rows else {}
        if prompts is None and any("prompts" in r.fn.extras for r in self.rewards) and all("question" in r for r in rows):
            prompts = [self.prompt_of(r) for r in rows]
        scores, errors = {}, {}
        for r in self.rewards:
            cols = dict(columns)
            if "prompts" in r.fn.extras and prompts is not None:
                cols["prompts"] = list(prompts)
            scores[r.name], errs = r.fn.score_texts(texts, cols)
            errors[r.name] = len(errs)
        return scores, errors

    def refusals(self, texts: list[str], rows: list[dict]) -> list[bool] | None:
        """Per completion, whether the correctness reward calls it a refusal; None where it cannot say."""
        c = self.correctness
        explain = getattr(c.fn.scorer, "explain", None) if c is not None and c.spec.refusals else None
        if explain is None:
            return None
        return [explain(t, **r)["reason"] == "refusal" for r, t in zip(rows, texts)]


def recipe_rewards(recipe) -> list[tuple[RewardFunction, float]]:
    """The recipe's (or task's) rewards, built as training builds them (own functions included), with weights."""
    return [(r.fn, r.weight) for r in Task.of(recipe).rewards]
