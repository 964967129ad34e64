"""A recipe's rows: `load_datasets(recipe)` is what training and evaluation call: the recipe's
train rows and held-out rows (its eval file, or a seeded split of train),
plus notes for the user (skipped rows, non-numeric answers on a numeric
task, questions present in both). Rows are checked against the recipe's
template (message-list questions need `chat`).
"""
from __future__ import annotations

from grpokit.data.io import load_rows, overlapping_questions, split_rows
from grpokit.rewards import names_reading, numeric_rewards

# Rewards that score answers as numbers (declared in the rewards table): a recipe using one is a
# numeric task, and `grpokit data check --task math` asks for the same check.
NUMERIC_REWARDS = tuple(numeric_rewards())


def is_numeric_task(recipe) -> bool:
    return any(r.name in NUMERIC_REWARDS for r in recipe.rewards)


def is_code_task(recipe) -> bool:
    """Scored by tests (a reward that reads code: `code_tests`): every row must carry its tests
    (grpokit.data.code_rows)."""
    return any(r.name in names_reading("code") for r in recipe.rewards)


def is_json_task(recipe) -> bool:
    """Scored by a reward that reads JSON (json_schema, json_fields): every row needs its schema
    (grpokit.data.json_rows)."""
    return any(r.name in names_reading("json") and r.path is None for r in recipe.rewards)


def read_args(recipe) -> dict:
    """How a recipe's rows are read (fields, template, the task's checks): for training here, and for
    `recipe check` (grpokit.recipe.data_checks.check_data_rows), which reads them the same way."""
    d = recipe.data
    return dict(question_field=d.question_field, answer_field=d.answer_field, hf_config=d.hf_config,
                template=d.template, numeric=is_numeric_task(recipe), code=is_code_task(recipe),
                json_task=is_json_task(recipe))


def _load(recipe, spec: str, split: str, notes: list[str]):
    rows, report = load_rows(recipe.resolve_data_path(spec), skip_bad_rows=recipe.data.skip_bad_rows, split=split,
                             **read_args(recipe))
    if report.non_numeric:
        notes.append(f"{len(report.non_numeric)} answer(s) of {spec} are not numbers although "
                     f"{' / '.join(NUMERIC_REWARDS)} scores this recipe (first: {report.non_numeric[0]}); "
                     "`grpokit data check FILE --task math` lists them")
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
