"""Where a data spec in a recipe or on the command line points: a file, a bundled file, or a hub dataset.

    resolve_data_path("builtin:arithmetic/train.jsonl", base)   # a file shipped inside grpokit
    resolve_data_path("hf:openai/gsm8k", base)                  # left as it is: read by grpokit.data.formats
    resolve_data_path("data/train.jsonl", Path("recipes"))      # relative to `base` (the recipe's folder)

The one place these rules live: the recipe, `grpokit data`, `grpokit rm` and evaluation all resolve through it.
"""
from __future__ import annotations

from pathlib import Path

from grpokit.datasets import BUILTIN_DATA


def resolve_data_path(spec: str, base: Path) -> str:
    """A data spec as the path (or `hf:` id) to read: `builtin:` from BUILTIN_DATA, relative paths from `base`."""
    if spec.startswith("hf:"):
        return spec
    if spec.startswith("builtin:"):
        return str(BUILTIN_DATA / spec[len("builtin:"):])
    p = Path(spec).expanduser()
    return str(p if p.is_absolute() else (base / p).resolve())
