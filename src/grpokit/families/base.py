"""What a task family declares: its row (`Family`) and the parts the row is made of.

A family is one kind of task grpokit knows end to end (math answers, code with tests, JSON objects, SQL queries,
tool episodes, preference replies): one module of this package holds what is particular to it, and its `FAMILY`
is its row in grpokit.families.FAMILIES. Each part is optional; a stage that reads the table uses the parts it
needs and skips a family without one:

    row_problems    `data check --task NAME` and a recipe judged by the family's rewards: what makes a row unusable
    answer_problem  the same, for a warning about a usable row's gold answer (math: not a number)
    without_answer  rows the family's rewards judge without a gold answer (tests, a schema): `answer` is optional
    make_data       the command that makes a data file, for recipe check's "file not found"
    generators      `grpokit data generate NAME`
    importers       `grpokit data import NAME`: a packaged benchmark as rows (code: HumanEval)
    variants        evaluation-only copies of held-out rows (math: the numbers redrawn; a family may add
                    rewritten phrasings the model never trained on, as another Variant)
    audit           the reward audit's tricks for its answers: an AnswerForm of its own, or an AnswerLines form
                    (answers on a marker line: the answer-line tricks of grpokit.families.answer_lines)
    layout          its own columns on a row (a code row's tests, a JSON row's schema, a tool row's tools), read
                    and checked on every row that carries them, whatever the task (grpokit.data)
    episodes        its answers are tool episodes in the recipe's environment (`env:`): the tool evaluation, the
                    report's tool section and the audit's scripted hacks (`hacks`) are its
    columns         evaluation and report columns beside the correctness rewards' metrics
    demos           `grpokit demo --task NAME`: a module of grpokit.demo (demos train, so they sit above training)

Which rewards belong to a family is said by the rewards themselves (`Builtin.reads` in grpokit.rewards.registry
is a family's name); a recipe's family is the one its judging reward reads (grpokit.families.family_of).
This module imports nothing but grpokit.errors: the table is read by `grpokit --help` and `recipe check`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

from grpokit.errors import Problem


# ---------------------------------------------------------------- the audit's tricks (grpokit.audit)
@dataclass(frozen=True)
class Trick:
    name: str
    description: str
    build: Callable[[Any], str | None]  # a row of its task -> the completion; None: the trick does not apply


@dataclass(frozen=True)
class AnswerForm:
    """The reward audit's material for one family's answers (grpokit.audit.by_task): the tricks that fit them and
    the honest answers they are measured against."""

    what: str  # its tricks as the audit table names them, e.g. "code tricks"
    needs: str  # what a training row must carry for them, e.g. "a `schema`"
    tricks: dict[str, Trick]
    prepare: Callable[[dict], Any]  # a training row -> the row the tricks read; None: it lacks `needs`
    honest: Callable[[Any], tuple[str | None, list[str]]]  # -> (the right answer or None, wrong ones to try in order)


@dataclass(frozen=True)
class AnswerLines:
    """The reward audit's material for answers on a marker line (`Final answer: 72`): tricks built from a row
    prepared with the recipe's own markers and settings (grpokit.audit.rewards scores them, "at least as much" as
    an honest wrong answer is a loophole). The math family's form, and the audit's for a task judged by an own
    reward (grpokit.families.answer_lines.FORM)."""

    what: str  # its tricks as the audit table names them
    tricks: dict[str, Trick]
    # (row, the recipe's markers, think, min reasoning lines, the prompt training gives it or None) -> the row the
    # tricks read, with `honest(value)`, `gold` and `num(delta)`; None: the row has no answer they can edit
    prepare: Callable[..., Any]


@dataclass(frozen=True)
class HackCase:
    """A scripted tool episode for the audit (grpokit.audit.tools): calls played on the environment, then a final
    message, scored by the recipe's rewards against an honest failure."""

    name: str
    description: str
    calls: tuple[tuple[str, dict], ...]
    final: str = "done"


def registrar(table: dict[str, Trick], kind: str):
    """A decorator factory: `register(name, description)(build)` files an adversarial completion builder in
    `table` (one table per kind of answer: the answer-line tricks of grpokit.families.answer_lines, each family's own)."""

    def register(name: str, description: str):
        def deco(build: Callable[[Any], str | None]):
            if name in table:
                raise ValueError(f"{kind} {name!r} registered twice")
            table[name] = Trick(name, description, build)
            return build

        return deco

    return register


# ---------------------------------------------------------------- the other parts of a row
class Option(NamedTuple):
    """A difficulty knob of a generator: `grpokit data generate NAME --<flag>`, passed to make() as `keyword`."""

    flag: str  # e.g. "numbers" (--numbers)
    keyword: str  # make()'s keyword argument
    type: type  # bool: a switch (`--operands`), True when given
    help: str


class Generator(NamedTuple):
    make: Callable[..., list[dict]]  # make(rows, seed, exclude, **options) -> rows; questions in `exclude` never
    what: str  # one line for `grpokit data generate --help`
    options: tuple[Option, ...] = ()  # its knobs (make() raises ValueError, said with the flag, for a bad value)
    most: int | None = None  # how many distinct rows it can make at all: `data generate --rows` above it is refused


class Variant(NamedTuple):
    """An evaluation-only copy of held-out rows, scored beside them: a model that does much better on the
    originals has memorised them (grpokit.evaluation: the gap)."""

    name: str  # its column in the evaluation table and its key in results.json
    what: str  # the legend under the table
    applies: Callable[[dict], bool]  # the rows it can copy
    make: Callable[..., list[dict]]  # make(rows, seed, exclude) -> the copies; questions in `exclude` never
    copies: str = "rows it applies to"  # what rows those are, for `data perturb|rewrite`'s refusal of another file
    title: str = ""  # its column's title in the demo and comparison tables ("" : its name)


@dataclass(frozen=True)
class Column:
    """A figure evaluation reports per checkpoint beside the correctness rewards' metrics, and the report shows.
    It is the mean, over the rows where it is not None, of `per_row(completion, row)` (a completion is text, or a
    tool episode's messages). A tool family's evaluation (grpokit.evaluation.tools: episodes played by TRL) also
    takes the mean of the task's reward with `role`, or a metric TRL logs (`logged`)."""

    key: str  # its key in the results file
    title: str  # its header in the table and the report
    legend: str = ""  # what it measures, under the terminal table
    share: bool = True  # a share (shown as a percentage), else a plain number
    per_row: Callable[[Any, dict], float | None] | None = None
    role: str | None = None
    logged: str | None = None
    short: str | None = None  # a narrower header for the terminal table

    @property
    def header(self) -> str:
        return self.short or self.title


class Layout(NamedTuple):
    """A family's own columns on a row, read and checked on every row that carries them, whatever the task: a
    code row's tests under any recipe, a tool row's tool columns, a JSON row's schema (grpokit.data)."""

    has: Callable[[dict], bool]  # the raw row carries the family's columns
    problems: Callable[[dict, str], list[Problem]]  # (the row as read, where) -> what makes them unusable
    # (raw row, the question column asked for) -> the row in grpokit's layout (HumanEval's own layout); None: as is
    read: Callable[[dict, str | None], dict] | None = None
    # (the row, its answer or None) -> what `data check` counts it as among answer types; None: by its answer's type
    kind: Callable[[dict, object], str | None] | None = None


class Demo(NamedTuple):
    module: str  # grpokit.demo.<module> holds run(output_dir, overrides, **options) -> dict
    output_dir: str  # the default run directory
    what: str  # one line for `grpokit demo --help`
    # Recipe files (names in recipes/) for a module that serves several families, in the order its run() takes
    # them (the SFT-vs-GRPO comparison: the SFT recipe, then the GRPO one); empty: the module runs its own recipe.
    recipes: tuple[str, ...] = ()


# ---------------------------------------------------------------- the row
@dataclass(frozen=True)
class Family:
    name: str  # its name everywhere: `data check --task NAME`, `Builtin.reads`, the audit's kind
    what: str  # what its answers are, one line
    check: str = ""  # what `data check --task NAME` adds to every row's checks (its --help); "": nothing
    row_problems: Callable[[dict, str, str | None], list[Problem]] | None = None  # (raw row, where, answer column)
    answer_problem: Callable[[object, str], Problem | None] | None = None  # (a usable row's answer, where)
    answer_note: str = "are flagged"  # the load note on answers answer_problem warns about: "N answer(s) of FILE ..."
    without_answer: Callable[[dict], bool] | None = None
    make_data: str | None = None
    generators: dict[str, Generator] = field(default_factory=dict)
    importers: dict[str, Generator] = field(default_factory=dict)  # `grpokit data import NAME`: make() -> rows
    variants: tuple[Variant, ...] = ()
    audit: AnswerForm | AnswerLines | None = None
    layout: Layout | None = None
    episodes: bool = False
    # The audit's scripted hacks of an episodes family: (environment name, row, the environment) -> (the honest
    # failure, the hacks); None for an environment it has none for.
    hacks: Callable[[str, dict, Any], tuple[HackCase, list[HackCase]] | None] | None = None
    columns: tuple[Column, ...] = ()
    demos: dict[str, Demo] = field(default_factory=dict)
    # The completion `grpokit sft` teaches for one row of the family (row, the recipe's answer-line marker), or None
    # where the row gives nothing better than the answer line alone (grpokit.training.sft.reference_completion).
    reference: Callable[[dict, str], str | None] | None = None
    # The same rows with what `reference` works a solution out from, where answer-only rows hold it in their words
    # (math's two-step problems: their operands, read from the question); ValueError naming the first row it cannot
    # work out. The composition demo's worked-SFT arm (grpokit.demo.composition) trains on it.
    worked_rows: Callable[[list[dict]], list[dict]] | None = None


class HonestLayout:
    """An answer as the recipe lays it out: the marker and the value (`answer`), after honest reasoning, in a
    `<think>` block where the recipe wants one (`honest`). Needs `marker`, `reasoning` and `think`: the answer-line
    audit's rows (grpokit.families.answer_lines.AuditRow) and the text audit's (grpokit.audit.text.TextRow)."""

    marker: str
    reasoning: str
    think: bool

    def answer(self, value: str) -> str:
        return f"{self.marker} {value}"

    def honest(self, value: str) -> str:
        if self.think:
            return f"<think>\n{self.reasoning}\n</think>\n{self.answer(value)}"
        return f"{self.reasoning}\n{self.answer(value)}"
