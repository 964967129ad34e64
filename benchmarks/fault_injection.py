"""Faults at every write of the one writer, proven by injection (SQLite's I/O-error and crash tests, for grpokit).

    .venv/bin/python benchmarks/fault_injection.py --disk                  # every point: 3 faults and a kill each
    .venv/bin/python benchmarks/fault_injection.py --faults enospc --every 4 --kill-every 0   # a strided sample

A tiny pipeline (benchmarks/fault_harness.py) runs once with every write, rename and fsync of grpokit.run.writer
(and the run lock's one write) counted: `data generate` (the training rows) -> `train` (3 steps, a checkpoint at
each) -> `eval` -> `report` -> `export` -> `rm import-csv`, on the tests' tiny model (tests/conftest.py). The
folder is copied before each command. Then, for every point N and every fault (an OSError without an errno,
ENOSPC, EIO), the command holding N runs again from its copy with its N-th I/O failing; separately, a process of
its own is killed with SIGKILL at N. After each:

- every user file (the recipe, the model, the data, the reward module, the CSV) is byte for byte as it was;
- every file grpokit wrote is whole (JSON and YAML parse, a JSONL file's lines parse but for the last line of an
  appended log after a kill, which its readers skip: grpokit.run.files), and no temporary of the writer is left;
- the command exited with `error:` and `fix:` lines, or completed; no traceback, printed or raised;
- the command the fix names (else the same command; a killed training: `train --resume`) completes. A second fix
  is followed once.

`--disk` also mounts a tmpfs (root only; skipped with mount's own reason elsewhere), runs the pipeline there, and
runs each command again with the disk filled (a file of the user's) to half of what that command adds, so it fills
mid-write for real; the fix is deleting the filler, then the command the error names.

Prints a line per point (those that broke an invariant with what broke) and a table: points found by kind,
points injected, and each class of outcome per fault. docs/reliability.md "Faults at every write, proven by
injection" holds a dated run; tests/test_fault_injection.py runs a sample of the same sweep in CI.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fault_harness import FAULTS, KINDS, Outcome, Pipeline, Points, judge, one_point, run_here  # noqa: E402


# ---------------------------------------------------------------- a full disk
@contextlib.contextmanager
def small_disk(size_mb: int):
    """(a tmpfs of `size_mb` MiB mounted on a new folder, None), or (None, why not: mount's own words). Root only;
    unmounted at the end."""
    where = Path(tempfile.mkdtemp(prefix="grpokit-small-disk-"))
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(where)],
                              capture_output=True, text=True, timeout=60)
        why = None if done.returncode == 0 else (done.stderr.strip() or f"mount exited {done.returncode}")
    except (OSError, subprocess.SubprocessError) as e:
        why = f"mount could not run: {e}"
    if why:
        where.rmdir()
        yield None, why
        return
    try:
        yield where, None
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=60)
        where.rmdir()


def _used(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file() and not f.is_symlink())


def full_disk(work: Path, model: Path, size_mb: int = 1024, log=print) -> tuple[str | None, list[Outcome]]:
    """The pipeline on a small tmpfs, each command once with the disk filled (a file of the user's) to half of what
    that command adds, so it fills mid-write; then the filler goes (the fix a full disk names) and the command the
    error names runs. (why it was skipped, or None; the outcomes)."""
    with small_disk(size_mb) as (disk, why):
        if disk is None:
            return why, []
        pipe = Pipeline(disk / "work", model, snapshots=Path(work) / "disk-snapshots")
        pipe.count()
        sizes = [_used(pipe.snapshots / str(i)) for i in range(len(pipe.commands))] + [_used(pipe.work)]
        outcomes = []
        for i, (name, argv) in enumerate(pipe.commands):
            pipe.restore(i)
            before = pipe.user_files(after=i)
            free = max(0, sizes[i + 1] - sizes[i]) // 2
            filler = disk / "filler"
            with open(filler, "wb") as f:
                os.posix_fallocate(f.fileno(), 0, max(1, shutil.disk_usage(disk).free - free))
            result = run_here(argv, Points())
            o = judge(pipe, i, before, result, Outcome(name, 0, "disk", f"{free // 1024} KiB free", "full disk", "",
                                                       None, []), fix=filler.unlink)
            outcomes.append(o)
            _said(o, log)
        return None, outcomes


# ---------------------------------------------------------------- the sweep
def sweep(work: Path, faults: list[str], every: int = 1, kill_every: int | None = 1, model: Path | None = None,
          log=print) -> tuple[list, list[Outcome]]:
    pipe = Pipeline(work, model)
    points = pipe.count()
    log(f"{len(points)} points: " + ", ".join(f"{sum(p[2] == k for p in points)} {k}" for k in KINDS))
    outcomes = []
    chosen = sample(points, every)
    for n, (i, local, kind, path) in enumerate(points, 1):
        for fault in faults:
            if n in chosen:
                outcomes.append(one_point(pipe, i, local, kind, path, fault))
                _said(outcomes[-1], log)
        if kill_every and (n - 1) % kill_every == 0:
            outcomes.append(one_point(pipe, i, local, kind, path, "kill"))
            _said(outcomes[-1], log)
    return points, outcomes


def sample(points: list, every: int) -> set[int]:
    """Every `every`-th point (1-based numbers), and the first point of each kind in each command."""
    chosen = set(range(1, len(points) + 1, every))
    first = {}
    for n, (i, _, kind, _) in enumerate(points, 1):
        first.setdefault((i, kind), n)
    return chosen | set(first.values())


def _said(o: Outcome, log) -> None:
    line = f"{o.command:14} #{o.local:<4} {o.kind:6} {o.fault:8} {o.cls}"
    log(line + ("".join(f"\n    {b}" for b in o.broken) if o.broken else ""))


def table(points: list, outcomes: list[Outcome]) -> str:
    from collections import Counter

    columns = [c for c in ("oserror", "enospc", "eio", "kill", "full disk") if any(o.fault == c for o in outcomes)]
    by = Counter((o.cls, o.fault) for o in outcomes)
    lines = [f"points: {len(points)} ({', '.join(f'{sum(p[2] == k for p in points)} {k}s' for k in KINDS)}); "
             f"injected: {len(outcomes)}", "", "| outcome | " + " | ".join(columns) + " |",
             "|---|" + "---|" * len(columns)]
    for cls in sorted({c for c, _ in by}):
        lines.append(f"| {cls} | " + " | ".join(str(by[(cls, c)]) for c in columns) + " |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--faults", default=",".join(FAULTS), help="which faults (default: all)")
    p.add_argument("--every", type=int, default=1, help="fail every K-th point (default 1: all)")
    p.add_argument("--kill-every", type=int, default=1, help="kill at every K-th point (0: no kill)")
    p.add_argument("--work", help="the pipeline's folder (default: a new temporary one)")
    p.add_argument("--disk", action="store_true", help="also fill a small tmpfs mid-write in each command (root)")
    args = p.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="faults-")) / "work"
    start = time.time()
    points, outcomes = sweep(work, [f for f in args.faults.split(",") if f], args.every, args.kill_every)
    if args.disk:
        why, full = full_disk(work.parent, work / "model")
        print(f"full disk: skipped ({why})" if why else f"full disk: {len(full)} commands filled mid-write")
        outcomes += full
    print(table(points, outcomes))
    print(f"{time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
