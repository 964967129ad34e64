"""What every command shares: the stderr console, the one error printer, the `--set` option."""
from __future__ import annotations

import difflib
from pathlib import Path
import errno
import shlex

from rich.console import Console

from grpokit.errors import GrpokitError, Problem
from grpokit.run import RunDir

err = Console(stderr=True, highlight=False, soft_wrap=True)


def print_error(e: GrpokitError) -> int:
    """Print `error: title`, then `- where: what` and `fix: ...` per problem; return the error's exit code."""
    err.print(f"[red]error:[/] {e.title or 'cannot continue'}", markup=True)
    for p in e.problems:
        # where/what/fix quote user input (file names, YAML values): printed as text, never as rich markup
        err.print(f"  - {p.where}: {p.message}", markup=False)
        if p.fix:
            err.print(f"      fix: {p.fix}", markup=False)
    return e.exit_code


def run_script(main) -> None:
    """A benchmark's or an experiment's entry point: exit with `main()`'s status; a GrpokitError (a recipe or an
    override that does not load) printed by `print_error` as every command prints it, never as a traceback."""
    try:
        code = main()
    except GrpokitError as e:
        code = print_error(e)
    raise SystemExit(code)


# What usually fixes an OSError a command meets on the disk (a full disk, an I/O error), by errno; the command is
# then run again: the writer (grpokit.run.writer) leaves each file whole, old or new (benchmarks/fault_injection.py
# fails each of its writes in turn to show it).
_DISK_FIXES = {
    errno.ENOSPC: "free space on that disk (or write to another one)",
    errno.EDQUOT: "free space within your disk quota (or write to another disk)",
    errno.EIO: "the disk reported an I/O error: check it (`dmesg`, its mount, its cable)",
    errno.EROFS: "the disk is mounted read-only: write to another folder, or mount it read-write",
    errno.EACCES: "check the permissions of that folder (or write to another one)",
    errno.EPERM: "check the permissions of that folder (or write to another one)",
    errno.EFBIG: "the file is larger than this file system (or a ulimit -f) allows: write to another disk",
}


def os_error(e: OSError, argv: list[str]) -> GrpokitError:
    """A file operation the system refused (a full disk, an I/O error), as where / what / fix: the command again."""
    fix = _DISK_FIXES.get(e.errno, "remove what stopped it")
    return GrpokitError([Problem(str(e.filename or "a file operation"), e.strerror or str(e) or type(e).__name__,
                                 f"{fix}, then run `grpokit {shlex.join(argv)}` again")], exit_code=1,
                        title="the system refused a file operation")


def add_set_option(parser, help: str = "override a recipe value (repeatable), e.g. --set train.learning_rate=2e-5"):
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help=help)


def add_overwrite_option(parser, what: str = "the output file") -> None:
    parser.add_argument("--overwrite", action="store_true", help=f"replace {what} if it exists (never a link, a "
                        "hard-linked file, a file this command reads or a file of a grpokit run)")


def print_notes(recipe) -> None:
    """What validation could not check here (a hub id or `hf:` dataset while offline, vLLM/CUDA missing)."""
    for note in getattr(recipe, "notes", None) or []:
        err.print(f"[yellow]note:[/] {note}", highlight=False)


def require_run(path: str, command: str):
    """The run directory at `path`, or GrpokitError saying it is none (and naming the runs that are there).

    A run is a folder with config.yaml, run.json or metrics.jsonl (a run cut short, or one of an older version,
    still counts); anything else would give an empty report, a silent doctor or an evaluation of nothing."""

    def is_run(folder: Path) -> bool:
        run = RunDir(folder)
        return any(f.is_file() for f in (run.config, run.run_json, run.metrics))

    marks = tuple(f.name for f in (RunDir(".").config, RunDir(".").run_json, RunDir(".").metrics))
    folder = Path(path)
    if is_run(folder):
        return RunDir(folder)

    def runs_in(parent: Path) -> list[str]:
        if not parent.is_dir():
            return []
        return sorted(str(p) for p in parent.iterdir() if p.is_dir() and is_run(p))

    inside, beside = runs_in(folder), runs_in(folder.parent)
    close = difflib.get_close_matches(str(folder), beside, n=3, cutoff=0.6)
    what = ("no such folder" if not folder.exists() else f"not a grpokit run directory (none of {', '.join(marks)})")
    if inside:
        fix = f"pass one of the runs inside it: {', '.join(inside[:5])}"
    elif close:
        fix = f"did you mean {' or '.join(close)}?"
    else:
        fix = f"pass the output_dir of an earlier `grpokit train`{' (runs there: ' + ', '.join(beside[:5]) + ')' if beside else ''}"
    raise GrpokitError([Problem(f"grpokit {command} {path}", what, fix)])
