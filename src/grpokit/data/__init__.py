"""Data: reading rows from files and the hub, checking them, the bundled and generated sets.

    train_rows, eval_rows, notes = load_datasets(recipe)
    rows, report = load_rows(path, question_field="题目", answer_field="答案")

formats (JSONL/JSON/CSV/Parquet, hf:), io (row checks), code_rows (rows of a code task), load (a recipe's
train and held-out rows), paths (`builtin:` and relative specs), arithmetic, json_extraction and calculator (the
generated tasks: GENERATORS), json_rows (rows of a JSON task), humaneval (import).
"""
from grpokit.data import json_extraction
from grpokit.data.arithmetic import generate, is_generated, perturb_rows
from grpokit.data.calculator import generate_tool_rows
from grpokit.data.code_rows import is_code_row, reference_of
from grpokit.data.formats import read_file
from grpokit.data.humaneval import import_humaneval
from grpokit.data.io import check_file, check_jsonl, grouped, load_rows, question_keys, split_rows
from grpokit.data.load import is_numeric_task, load_datasets, load_train_rows
from grpokit.data.paths import resolve_data_path
from grpokit.data.rows import closest_column, question_key
from grpokit.datasets import BUILTIN_DATA

# `grpokit data generate TASK`: each task's generate(rows, seed, exclude) -> rows (the command's choices name them)
GENERATORS = {"arithmetic": generate, "json": json_extraction.generate, "calculator": generate_tool_rows}

__all__ = ["BUILTIN_DATA", "GENERATORS", "check_file", "check_jsonl", "closest_column", "generate", "generate_tool_rows", "grouped", "import_humaneval", "is_code_row",
           "is_generated", "is_numeric_task", "load_datasets", "load_rows", "load_train_rows", "perturb_rows",
           "question_key", "question_keys", "read_file", "reference_of", "resolve_data_path", "split_rows"]
