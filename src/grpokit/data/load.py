"""A recipe's rows: `load_datasets(recipe)` is what training and evaluation call: the recipe's
train and held-out rows (its eval file, or a seeded split of train), plus notes for the user
(skipped rows, answers the task's family warns about, questions present in both). Rows are checked
against the recipe's template (message-list questions need `chat`) and by the recipe's task family
(grpokit.families.family_of: the family its correctness reward reads).
"""
from __future__ import annotations

from grpokit.data.io import load_rows, overlapping_questions, split_rows
from grpokit.families import family_of


def read_args(recipe) -> dict:
    """How a recipe's rows are read (fields, template, the task's family): for training here, and for
    `recipe check` (grpokit.recipe.data_checks.check_data_rows), which reads them the same way."""
    d = recipe.data
    return dict(question_field=d.question_field, answer_field=d.answer_field, hf_config=d.hf_config,
                template=d.template, family=family_of(recipe.rewards))


def _load(recipe, spec: str, split: str, notes: list[str]):
    args = read_args(recipe)
    rows, report = load_rows(recipe.resolve_data_path(spec), skip_bad_rows=recipe.data.skip_bad_rows, split=split,
                             **args)
    family = args["family"]
    if report.flagged_answers:
        notes.append(f"{len(report.flagged_answers)} answer(s) of {spec} {family.answer_note} (first: "
                     f"{report.flagged_answers[0]}); `grpokit data check FILE --task {family.name}` lists them")
    return rows, report


def load_datasets(recipe) -> tuple[list[dict], list[dict], list[str]]:
    d = recipe.data
    notes: list[str] = []
    train, report = _load(recipe, d.train, d.train_split, notes)
    if report.errors:
        notes.append(f"skipped {report.unusable} unusable row(s) of {d.train} (data.skip_bad_rows is true)")
    if d.eval is not None or (d.train.startswith("hf:") and d.eval_split):
        eval_rows, ereport = _load(recipe, d.eval or d.train, d.eval_split or "test", notes)
        if ereport.errors:
            notes.append(f"skipped {ereport.unusable} unusable eval row(s)")
    else:
        train, eval_rows = split_rows(train, d.eval_fraction, d.shuffle_seed)
    if d.eval_max_rows is not None:
        eval_rows = eval_rows[: d.eval_max_rows]
    both = overlapping_questions(train, eval_rows)
    if both:
        notes.append(f"{len(both)} eval question(s) also appear in train (e.g. {both[0][:60]!r}); "
                     "held-out accuracy on them measures memory, not skill")
    return train, eval_rows, notes


def load_train_rows(recipe) -> list[dict]:
    return load_datasets(recipe)[0]
