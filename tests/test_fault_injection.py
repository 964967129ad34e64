"""Faults at every write, a sample in CI (issue 53): the harness of benchmarks/fault_harness.py on the tiny pipeline
(data generate -> train 3 steps -> eval -> report -> export -> rm import-csv), each point's command run again with
one write, rename or fsync of the one writer failing, or killed there, or on a full disk; then every invariant
checked (user files byte for byte, grpokit's files whole, error + fix and no traceback, the fix's command completes,
no temporary left). `benchmarks/fault_injection.py --disk` runs every point; docs/reliability.md has its table.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import fault_harness as harness  # noqa: E402
from fault_injection import full_disk, small_disk  # noqa: E402

FAULTS = list(harness.FAULTS)
STRIDE = 20  # besides the first point of each kind in each command: every 20th point


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory, tiny_model_dir):
    pipe = harness.Pipeline(tmp_path_factory.mktemp("faults") / "work", model=tiny_model_dir)
    return pipe, pipe.count()


def _said(outcomes) -> str:
    return "\n".join(f"{o.command} #{o.local} {o.kind} {o.fault}: {b}" for o in outcomes for b in o.broken)


def test_every_command_writes_through_the_writer_and_every_kind_is_counted(pipeline):
    pipe, points = pipeline
    kinds = {(pipe.commands[i][0], kind) for i, _, kind, _ in points}
    assert {name for name, _ in pipe.commands} == {name for name, _ in kinds}
    assert {kind for _, kind in kinds} == set(harness.KINDS)
    assert {k for name, k in kinds if name == "train"} == set(harness.KINDS)  # logs, records, markers, run.json


def test_a_failed_write_rename_or_fsync_loses_nothing_and_the_fix_works(pipeline):
    # The first point of each kind in each command and every STRIDE-th, the three faults in turn: 0 broken.
    pipe, points = pipeline
    first = {}
    for n, (i, _, kind, _) in enumerate(points):
        first.setdefault((i, kind), n)
    chosen = sorted(set(first.values()) | set(range(0, len(points), STRIDE)))
    outcomes = [harness.one_point(pipe, *points[n], FAULTS[k % len(FAULTS)]) for k, n in enumerate(chosen)]
    assert _said(outcomes) == ""
    assert {o.said for o in outcomes} <= {"error+fix", "completed"}
    assert any(o.recovered_by and "train --resume" in o.recovered_by for o in outcomes)  # a failed run resumes


@pytest.mark.parametrize("where", [
    "the run's record, before anything else of the run exists",  # trained into again: nothing there to keep
    "a checkpoint's COMPLETE marker",                             # resumed from the checkpoint before
    "a plot of the report",                                       # the same command again
    "the export's record, before anything else of the export",   # found by the full sweep: the folder held only
])                                                                # the killed writer's temporary and was refused
def test_a_kill_at_a_write_loses_nothing_and_the_next_command_completes(pipeline, where):
    pipe, points = pipeline
    match = {"the run's record, before anything else of the run exists": (".grpokit-record.json", "train"),
             "a checkpoint's COMPLETE marker": ("COMPLETE", "train"), "a plot of the report": (".png", "report"),
             "the export's record, before anything else of the export": (".grpokit-record.json", "export")}[where]
    n = next(n for n, (i, _, kind, path) in enumerate(points)
             if pipe.commands[i][0] == match[1] and kind == "write" and match[0] in path)
    o = harness.one_point(pipe, *points[n], "kill")
    assert o.said == "killed" and _said([o]) == "" and o.recovered_by, (o.said, o.recovered_by)


def test_a_disk_that_fills_mid_write_loses_nothing_and_freeing_it_is_the_fix(tmp_path, tiny_model_dir):
    with small_disk(4) as (disk, why):  # only to learn whether this machine lets us mount one
        if disk is None:
            pytest.skip(f"mount refused here ({why}): the full disk needs a small tmpfs (root)")
    why, outcomes = full_disk(tmp_path, tiny_model_dir, log=lambda _: None)
    assert why is None and len(outcomes) == 6
    assert _said(outcomes) == ""
    train = next(o for o in outcomes if o.command == "train")
    assert train.said == "error+fix" and train.recovered_by  # refused or failed, then completed once freed
