"""Data: reading rows from files and the hub, checking them, the bundled sets.

    train_rows, eval_rows, notes = load_datasets(recipe)
    rows, report = load_rows(path, question_field="题目", answer_field="答案")

formats (JSONL/JSON/CSV/Parquet, hf:), io (row checks), rows (one row: its columns, normalised), load (a recipe's
train and held-out rows), paths (`builtin:` and relative specs). What a task family adds to a row check, its
generated and imported sets (HumanEval), are grpokit.families.
"""
from grpokit.data.formats import read_file
from grpokit.data.io import check_file, grouped, load_rows, question_keys, split_rows
from grpokit.data.load import load_datasets, load_train_rows
from grpokit.data.paths import resolve_data_path
from grpokit.data.rows import closest_column, question_key
from grpokit.datasets import BUILTIN_DATA

__all__ = ["BUILTIN_DATA", "check_file", "closest_column", "grouped", "load_datasets", "load_rows", "load_train_rows",
           "question_key", "question_keys", "read_file", "resolve_data_path", "split_rows"]
