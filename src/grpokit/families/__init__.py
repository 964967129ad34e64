"""Task families: each kind of task grpokit knows end to end is one module of this package and one row of `FAMILIES`.

    FAMILIES["code"]                  # its row check, generators, audit form, evaluation columns, demos (base.Family)
    family_of(recipe.rewards)         # the family a recipe's judging reward reads; None for an own reward
    generators()                      # `grpokit data generate NAME`: {name: Generator} over every family
    layout_problems(row, where)       # the checks of every family's own columns the row carries (any task)
    episodes_family()                 # the family whose answers are tool episodes (a recipe with env:)

`grpokit data check --task`, `grpokit data generate`, `grpokit demo --task`, `recipe check`, the reward audit and
evaluation take their choices from this table, and nothing else names a family: a built-in reward says which family
reads it (`Builtin.reads`), a recipe's family is the one its correctness (else preference) reward reads, and a
stage that needs a kind of family asks the table for it (the one whose answers are episodes, the rows whose
columns a family reads) rather than naming one (tests/test_families.py checks that no module outside this
package imports a family's module).
Adding a family is a module with its `FAMILY` and a row here (docs/extending.md, "A task family").
"""
from __future__ import annotations

from grpokit.errors import Problem
from grpokit.families import code, countdown, json, math, preference, sql, tools
from grpokit.families.answer_lines import FORM as ANSWER_LINES  # the answer-line form: math's, and an own reward's
from grpokit.families.base import (
    AnswerForm,
    AnswerLines,
    Column,
    Demo,
    Family,
    Generator,
    HackCase,
    Layout,
    Option,
    Trick,
    Variant,
    registrar,
)
from grpokit.rewards import builtin_of

# The families, in the order the command line lists them.
FAMILIES: dict[str, Family] = {
    "math": math.FAMILY,
    "countdown": countdown.FAMILY,
    "code": code.FAMILY,
    "json": json.FAMILY,
    "sql": sql.FAMILY,
    "preference": preference.FAMILY,
    "tools": tools.FAMILY,
}

JUDGING_ROLES = ("correctness", "preference")  # the roles whose reward says what a task's answers are


def family_of(reward_configs) -> Family | None:
    """The family of the first built-in reward that judges the answers (a JUDGING_ROLES role) and reads a family's
    answers; None when none does (an own reward: only the checks every row gets)."""
    for rc in reward_configs:
        b = builtin_of(rc)
        if b is not None and b.role in JUDGING_ROLES and b.reads in FAMILIES:
            return FAMILIES[b.reads]
    return None


def generators() -> dict[str, Generator]:
    return {name: g for f in FAMILIES.values() for name, g in f.generators.items()}


def importers() -> dict[str, Generator]:
    """`grpokit data import NAME`: {name: Generator whose make() takes no argument} over every family."""
    return {name: g for f in FAMILIES.values() for name, g in f.importers.items()}


def demos() -> dict[str, Demo]:
    return {name: d for f in FAMILIES.values() for name, d in f.demos.items()}


def judged_without_answer(obj: dict) -> bool:
    """A row some family's rewards judge without a gold answer (tests, a schema): its `answer` is optional."""
    return any(f.without_answer is not None and f.without_answer(obj) for f in FAMILIES.values())


def layout_of(obj: dict) -> Family | None:
    """The first family whose own columns (its `layout`) the raw row carries; None for a plain row."""
    return next((f for f in FAMILIES.values() if f.layout is not None and f.layout.has(obj)), None)


def layout_problems(row: dict, where: str) -> list[Problem]:
    """What makes the family columns the row carries unusable, whatever the task: the first family's (in the
    table's order) that finds a problem; [] when none does."""
    for f in FAMILIES.values():
        if f.layout is not None and f.layout.has(row):
            found = f.layout.problems(row, where)
            if found:
                return found
    return []


def episodes_family() -> Family | None:
    """The family whose answers are tool episodes played in the recipe's environment (`episodes`): the tool
    evaluation's columns, the report's tool section and the audit's scripted hacks are its."""
    return next((f for f in FAMILIES.values() if f.episodes), None)


def variant_by_name(rows: list[dict], name: str) -> Variant | None:
    """The variant called `name` that applies to some of these rows (`grpokit data perturb|rewrite`)."""
    return next((v for v in variants_of(rows) if v.name == name), None)


def variants_of(rows: list[dict]) -> list[Variant]:
    """The evaluation-only copies (families' Variants) that apply to these held-out rows, one per name."""
    out: dict[str, Variant] = {}
    for v in (v for f in FAMILIES.values() for v in f.variants):
        if v.name not in out and any(v.applies(r) for r in rows):
            out[v.name] = v
    return list(out.values())


def variant_names() -> list[str]:
    """Every variant's name, in the families' order: the columns evaluation may add beside the held-out one."""
    return list(dict.fromkeys(v.name for f in FAMILIES.values() for v in f.variants))


def variant(name: str) -> Variant | None:
    """A family's evaluation-only copy by its name (the evaluation table's legend reads it)."""
    return next((v for f in FAMILIES.values() for v in f.variants if v.name == name), None)


def column(title: str) -> Column | None:
    """A family's evaluation column by its title (the evaluation table's legend reads it)."""
    return next((c for f in FAMILIES.values() for c in f.columns if c.title == title), None)


__all__ = ["ANSWER_LINES", "FAMILIES", "JUDGING_ROLES", "AnswerForm", "AnswerLines", "Column", "Demo", "Family", "Generator",
           "HackCase", "Layout", "Option", "Trick", "Variant", "column", "demos", "episodes_family", "family_of",
           "generators", "importers", "judged_without_answer", "layout_of", "layout_problems", "registrar", "variant",
           "variant_by_name",
           "variant_names", "variants_of"]
