"""Crash-tolerant run files: JSONL appended while training runs, JSON written whole, and the names of the
metrics grpokit itself records.

    read_jsonl(path)                   # every whole record; a cut or corrupt line is skipped with one note
    split_jsonl(path, step)            # keep records up to `step` (atomically), return the later lines
    read_json(path)                    # None for a missing or unreadable file, with a note
    parse_json(text)                   # json.loads, a file nested past the parser's depth a ValueError too

Every JSON state file grpokit reads (run.json, best.json, trainer_state.json, a metrics.jsonl line, a demo's
progress.json, ...) is parsed by `parse_json`: a hand-made `[[[[...` 100,000 deep is refused as not valid JSON
(named, with the note or error of its reader), never a RecursionError's traceback.

JSONL files are appended one record per line while training runs, so a crash can leave half a line at the
end: every reader goes through `read_jsonl`, which skips such lines with one note per file instead of failing.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Callable

from grpokit.run.writer import write_file

# Peak memory per logging step (GiB), written by the training run's RunLogger, plotted by the report: the
# GPU's allocator peak when training on one, else the process's peak resident size.
MEMORY_KEYS = ("grpokit/peak_memory_gib", "grpokit/peak_rss_gib")
# A sampler in another precision (grpokit.training.sampling): |log pi_trainer - log pi_sampler| per completion token,
# mean and max (TRL's own names on its vLLM path), and the share of tokens the correction clipped or masked.
SAMPLER_GAP_MEAN, SAMPLER_GAP_MAX = "sampling/sampling_logp_difference/mean", "sampling/sampling_logp_difference/max"
SAMPLER_CLIPPED = "sampling/clipped_frac"
SAMPLER_KEYS = (SAMPLER_GAP_MEAN, SAMPLER_GAP_MAX, SAMPLER_CLIPPED)
# Token positions the policy's loss pass computed in a step, and what TRL's padded layout (one row per completion,
# the prompt before each, padded to the longest) would have computed for the same rows (grpokit.training.logps).
POSITIONS_COMPUTED, POSITIONS_TRL = "grpokit/positions/computed", "grpokit/positions/trl_layout"
POSITIONS_RATIO = "grpokit/positions/ratio"  # computed / trl_layout, the report's curve
# The held-out probe (grpokit.training.probe), at step 0 and at every checkpoint: the task's primary metric on its
# rows (greedy; "accuracy" as in eval/results.json, whatever the metric is called), how many rows, and its seconds.
PROBE_ACCURACY, PROBE_ROWS, PROBE_SECONDS = "probe/accuracy", "probe/rows", "probe/seconds"


def note(line: str) -> None:
    print(f"note: {line}", file=sys.stderr)


class TooDeep(ValueError):
    """JSON nested deeper than the parser goes (a hostile `[[[[...`): not valid JSON for grpokit's state files."""


def parse_json(text: str | bytes):
    """`json.loads`, with a document nested past the parser's recursion limit a ValueError (`TooDeep`) like any
    other text that is not JSON: callers catch ValueError alone."""
    try:
        return json.loads(text)
    except RecursionError:
        raise TooDeep("nested deeper than grpokit reads (a hand-made file?)") from None


# ---------------------------------------------------------------- crash-tolerant JSONL
def _parse_lines(path: Path) -> tuple[list[tuple[bytes, dict]], list[int]]:
    """(raw line, record) for each whole record, and the 1-based numbers of partial or corrupt lines."""
    good, bad = [], []
    # Split on b"\n" only: str.splitlines would also split inside a record at U+2028 and friends.
    for i, raw in enumerate(path.read_bytes().split(b"\n"), 1):
        if not raw.strip():
            continue
        try:
            rec = parse_json(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            rec = None
        if isinstance(rec, dict):
            good.append((raw, rec))
        else:
            bad.append(i)
    return good, bad


def _bad_note(path: Path, bad: list[int], note: Callable[[str], None]) -> None:
    if bad:
        where = f"line {bad[0]}" + (f" and {len(bad) - 1} more" if len(bad) > 1 else "")
        note(f"{path}: skipped {len(bad)} partial or corrupt line(s) ({where}; a crash can cut the last line)")


def read_jsonl(path: str | Path, note: Callable[[str], None] = note) -> list[dict]:
    """Every whole record of a JSONL file ([] if it is missing); partial/corrupt lines skipped with one note."""
    path = Path(path)
    if not path.is_file():
        return []
    good, bad = _parse_lines(path)
    _bad_note(path, bad, note)
    return [rec for _, rec in good]


def split_jsonl(path: str | Path, max_step: int, note: Callable[[str], None] = note) -> list[bytes]:
    """Keep the whole records with step <= max_step in `path` (atomically); return the later lines, removed."""
    path = Path(path)
    if not path.is_file():
        return []
    good, bad = _parse_lines(path)
    _bad_note(path, bad, note)
    kept = [raw for raw, rec in good if _step(rec.get("step")) <= max_step]
    dropped = [raw for raw, rec in good if _step(rec.get("step")) > max_step]
    write_file(path, b"".join(raw + b"\n" for raw in kept), within=path.parent)
    return dropped


def _step(v) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def read_json(path: str | Path, note: Callable[[str], None] = note) -> dict | None:
    path = Path(path)
    if not path.is_file():
        return None
    try:
        data = parse_json(path.read_text(encoding="utf-8"))
    except TooDeep as e:
        note(f"{path}: not valid JSON ({e}); ignored")
        return None
    except (UnicodeDecodeError, ValueError):
        note(f"{path}: not valid JSON (cut by a crash?); ignored")
        return None
    return data if isinstance(data, dict) else None


def jsonable(v):
    """A metric value as JSON can hold it: tensors as numbers, NaN as null, inf as the string "inf"."""
    if hasattr(v, "item") and callable(v.item):  # a one-element tensor (torch stays out of this module)
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else str(v)
    return v
