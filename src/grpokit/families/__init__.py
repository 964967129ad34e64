"""Task families: each kind of task grpokit knows end to end is one module of this package and one row of `FAMILIES`.

    FAMILIES["code"]                  # its row check, generators, audit form, evaluation columns, demos (base.Family)
    family_of(recipe.rewards)         # the family a recipe's judging reward reads; None for an own reward
    generators()                      # `grpokit data generate NAME`: {name: Generator} over every family

`grpokit data check --task`, `grpokit data generate`, `grpokit demo --task`, `recipe check`, the reward audit and
evaluation take their choices from this table, and nothing else names a family: a built-in reward says which family
reads it (`Builtin.reads`), and a recipe's family is the one its correctness (else preference) reward reads.
Adding a family is a module with its `FAMILY` and a row here (docs/extending.md, "A task family").
"""
from __future__ import annotations

from grpokit.families import code, countdown, json, math, preference, sql, tools
from grpokit.families.base import AnswerForm, Column, Demo, Family, Generator, Option, Trick, Variant, registrar

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
    from grpokit.rewards import builtin_of

    for rc in reward_configs:
        b = builtin_of(rc)
        if b is not None and b.role in JUDGING_ROLES and b.reads in FAMILIES:
            return FAMILIES[b.reads]
    return None


def generators() -> dict[str, Generator]:
    return {name: g for f in FAMILIES.values() for name, g in f.generators.items()}


def demos() -> dict[str, Demo]:
    return {name: d for f in FAMILIES.values() for name, d in f.demos.items()}


def judged_without_answer(obj: dict) -> bool:
    """A row some family's rewards judge without a gold answer (tests, a schema): its `answer` is optional."""
    return any(f.without_answer is not None and f.without_answer(obj) for f in FAMILIES.values())


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


__all__ = ["FAMILIES", "JUDGING_ROLES", "AnswerForm", "Column", "Demo", "Family", "Generator", "Option", "Trick", "Variant",
           "column", "demos", "family_of", "generators", "judged_without_answer", "registrar", "variant",
           "variant_names", "variants_of"]
