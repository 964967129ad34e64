"""The fault-injection harness: a tiny pipeline, the one writer's I/O counted and failed, and what is checked after.

    pipe = Pipeline(work)                   # the tiny pipeline's folder, its commands in order
    points = pipe.count()                   # every write, rename and fsync, once (the folder copied before each command)
    o = one_point(pipe, i, local, kind, path, "enospc")    # command i again with its point `local` failing, recovered
    o.broken                                # [] when every invariant held (benchmarks/fault_injection.py says which)

benchmarks/fault_injection.py runs it over every point and prints the table; tests/test_fault_injection.py runs a
sample. `python benchmarks/fault_harness.py AT FIRED -- ARGV` is the killed child: `grpokit ARGV` with SIGKILL at its
point AT, where it fired written to the file FIRED first.

A point cannot pass without its fault: each records the operation and path its fault fired at, which must be the
counted one (`did not fire`, `fired at ...` are broken); a command that completes after its fault fired swallowed
a failed write, broken unless its point is on `BEST_EFFORT` (with the reason); and grpokit's own files from the
commands before (a run, its eval/results.json, its report) are hashed first and must be unchanged or replaced
whole, never deleted nor cut.

Points are the calls that put bytes or names on disk through grpokit.run.writer (the file handles it gives out,
os.write, os.replace, os.rename, os.fsync) and the run lock's write (grpokit.run.locks), seen by putting a
counting `os` in those two modules for the time of one command. Not covered: writes libraries make into folders
grpokit made for them (transformers' save_pretrained, torch.save); a fault inside the recovery itself.
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))  # this checkout's grpokit

KINDS = ("write", "rename", "fsync")  # what is counted and failed: the calls that put bytes or names on disk
FAULTS = {  # the error each injected fault raises, at the path it was about
    "oserror": lambda path: OSError(f"injected failure at {path}"),  # no errno: a failure the system does not name
    "enospc": lambda path: OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path)),
    "eio": lambda path: OSError(errno.EIO, os.strerror(errno.EIO), str(path)),
}
TRACEBACK = "Traceback (most recent call last)"
USER_FILES = ("recipe.yaml", "rewards.py", "ranked.csv", "model")  # and data/train.jsonl once data generate made it
LOGS = ("metrics.jsonl", "samples.jsonl", "health.jsonl")  # appended a line at a time: a kill may cut the last one


# ---------------------------------------------------------------- counting and failing the writer's I/O
class Points:
    """Every write, rename and fsync of the writer, in order; `at` (1-based) fails with `fault`, or kills. `fired`:
    (number, kind, path) of the operation the fault fired at (a kill writes it to `fired_file` first)."""

    def __init__(self, at: int | None = None, fault: str | None = None, fired_file: str | None = None):
        self.at, self.fault, self.seen, self.fired, self.fired_file = at, fault, [], None, fired_file

    def hit(self, kind: str, path) -> None:
        self.seen.append((kind, str(path)))
        if len(self.seen) == self.at:
            self.fired = (self.at, kind, str(path))
            if self.fault == "kill":
                if self.fired_file:
                    with open(self.fired_file, "w") as f:  # the real open: nothing of the writer's counted
                        json.dump(self.fired, f)
                os.kill(os.getpid(), signal.SIGKILL)
            raise FAULTS[self.fault](path)


# `.NAME.PID-` + mkstemp's random part (grpokit.run.temporaries): a temporary file's, or a staging folder's (an
# export's) in the middle of a path
_TEMPORARY = re.compile(r"\.\d+-[A-Za-z0-9_]{8}\.tmp(?=/|$)")


def same_point(a: tuple[str, str], b: tuple[str, str]) -> bool:
    """Whether two (kind, path) name one operation of two runs of a command: a temporary's PID and random part
    differ from run to run."""
    return a[0] == b[0] and _TEMPORARY.sub(".*.tmp", a[1]) == _TEMPORARY.sub(".*.tmp", b[1])


def _fd_path(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return f"fd {fd}"


class _File:
    """A file object of the writer's whose writes are counted (the rest is the file's own)."""

    def __init__(self, f, points: Points, path: str):
        self._f, self._points, self._path = f, points, path

    def write(self, data):
        self._points.hit("write", self._path)
        return self._f.write(data)

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        self._f.__enter__()
        return self

    def __exit__(self, *exc):
        return self._f.__exit__(*exc)


class _Os:
    """`os` as the writer sees it: writes, renames and fsyncs counted (and failed), everything else os's own."""

    def __init__(self, points: Points):
        self._points = points

    def __getattr__(self, name):
        return getattr(os, name)

    def replace(self, src, dst, **kw):
        self._points.hit("rename", dst)
        return os.replace(src, dst, **kw)

    def rename(self, src, dst, **kw):
        self._points.hit("rename", dst)
        return os.rename(src, dst, **kw)

    def fsync(self, fd):
        self._points.hit("fsync", _fd_path(fd))
        return os.fsync(fd)

    def write(self, fd, data):
        self._points.hit("write", _fd_path(fd))
        return os.write(fd, data)

    def fdopen(self, fd, *args, **kwargs):
        return _File(os.fdopen(fd, *args, **kwargs), self._points, _fd_path(fd))


@contextlib.contextmanager
def counted(points: Points):
    """The writer (and the run lock) doing their I/O through `points` while the block runs."""
    from grpokit.run import locks, writer

    saved = writer.os, locks.os
    writer.os = locks.os = _Os(points)
    try:
        yield points
    finally:
        writer.os, locks.os = saved


# ---------------------------------------------------------------- the pipeline
@dataclass
class Result:
    code: int | None  # None: killed, or an exception escaped main()
    out: str = ""
    points: list = field(default_factory=list)
    fired: tuple | None = None  # (number, kind, path) where the injected fault fired; None: it never did

    @property
    def fix(self) -> str | None:
        """The first command a `fix:` line names in backquotes (`grpokit ...` with its arguments)."""
        for line in self.out.splitlines():
            for part in line.split("`grpokit ")[1:] if "fix:" in line else []:
                command = part.split("`", 1)[0]
                if len(command.split()) > 1:
                    return command
        return None


def tiny_model(folder: Path) -> Path:
    """The tests' tiny model (tests/conftest.py: 2 layers, hidden 64, the embedded tokenizer)."""
    sys.path.insert(0, str(REPO / "tests"))
    from conftest import _save_tiny

    from grpokit.models import default_model_dir, load_tokenizer

    return _save_tiny(folder, load_tokenizer(str(default_model_dir())))


REWARDS = "def spread(prompts, completions, **_):\n    return [min(len(c), 40) / 40 for c in completions]\n"


class Pipeline:
    """The tiny pipeline in `work` (a fixed path: the run records absolute paths), its commands in order."""

    def __init__(self, work: Path, model: Path | None = None, snapshots: Path | None = None):
        import yaml

        self.work = work = Path(work).resolve()
        work.mkdir(parents=True, exist_ok=True)
        self.model = Path(model).resolve() if model else tiny_model(work / "model")
        (work / "data").mkdir(exist_ok=True)
        (work / "rewards.py").write_text(REWARDS)
        recipe = {"model": {"name": str(self.model)},
                  "data": {"train": str(work / "data" / "train.jsonl"), "eval_fraction": 0.25, "template": "plain_en"},
                  "rewards": [{"path": str(work / "rewards.py"), "function": "spread"}, {"name": "format"}],
                  "train": {"learning_rate": 1e-3, "num_generations": 2, "per_device_train_batch_size": 4,
                            "max_completion_length": 8, "max_steps": 3, "save_steps": 1, "logging_steps": 1,
                            "temperature": 1.0, "num_samples_logged": 2}}
        (work / "recipe.yaml").write_text(yaml.safe_dump(recipe))
        (work / "ranked.csv").write_text("prompt_id,question,candidate_id,text,rank\n"
                                         "p1,What is 2 + 2?,a,4,1\np1,What is 2 + 2?,b,5,2\n"
                                         "p2,What is 3 + 1?,a,4,1\np2,What is 3 + 1?,b,3,2\n")
        run = str(work / "run")
        self.commands = [
            ("data generate", ["data", "generate", "arithmetic", str(work / "data" / "train.jsonl"), "--rows", "24",
                               "--seed", "7"]),
            ("train", ["train", str(work / "recipe.yaml"), "--output-dir", run, "--skip-audit"]),
            ("eval", ["eval", run, "--max-rows", "2", "--max-new-tokens", "4"]),
            ("report", ["report", run]),
            ("export", ["export", run, "--checkpoint", "last", "--prompts", "1"]),
            ("rm import-csv", ["rm", "import-csv", str(work / "ranked.csv"), str(work / "rankings.jsonl")]),
        ]
        self.snapshots = Path(snapshots or work.parent / f"{work.name}-snapshots")
        self.at = 0  # the command whose copy the folder holds (restore)

    def user_files(self, after: int) -> dict[str, str]:
        """sha256 of every user file before command `after` runs (the generated rows are the user's from then on)."""
        paths = [self.work / n for n in USER_FILES] + [self.model] + (
            [self.work / "data" / "train.jsonl"] if after > 0 else [])
        out = {}
        for p in dict.fromkeys(paths):
            for f in sorted(p.rglob("*")) if p.is_dir() else [p]:
                if f.is_file():
                    key = str(f.relative_to(self.work)) if self.work in f.parents else str(f)
                    out[key] = hashlib.sha256(f.read_bytes()).hexdigest()
        return out

    # -- copies of the folder before each command
    def save(self, i: int) -> None:
        dest = self.snapshots / str(i)
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(self.work, dest, symlinks=True, ignore=shutil.ignore_patterns("model"))

    def restore(self, i: int) -> None:
        for p in self.work.iterdir():
            if p.name != "model":
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
        for p in (self.snapshots / str(i)).iterdir():
            (shutil.copytree(p, self.work / p.name, symlinks=True) if p.is_dir() else shutil.copy2(p, self.work / p.name))

    def count(self) -> list[tuple[int, int, str, str]]:
        """Run every command once, counting: (command index, its local point number, kind, path) per point."""
        points = []
        for i, (name, argv) in enumerate(self.commands):
            self.save(i)
            result = run_here(argv, Points())
            if result.code != 0:
                raise SystemExit(f"the pipeline's {name} failed without a fault:\n{result.out}")
            points += [(i, n, kind, path) for n, (kind, path) in enumerate(result.points, 1)]
        return points


def run_here(argv: list[str], points: Points) -> Result:
    """`grpokit ARGV` in this process with the writer's I/O through `points`; what it printed, its exit code."""
    from grpokit.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf), counted(points):
        try:
            code = main(argv)
        except BaseException:  # noqa: BLE001 - an exception out of main() is a traceback the user would see
            buf.write(traceback.format_exc())
            code = None
    return Result(code, buf.getvalue(), points.seen, points.fired)


def run_killed(pipe: Pipeline, argv: list[str], at: int) -> Result:
    """`grpokit ARGV` in a process of its own, killed with SIGKILL at its point `at`."""
    fired_file = pipe.snapshots / "fired.json"  # outside the folder the checks read
    fired_file.unlink(missing_ok=True)
    proc = subprocess.run([sys.executable, __file__, str(at), str(fired_file), "--", *argv], cwd=pipe.work,
                          capture_output=True, text=True, timeout=600)
    fired = tuple(json.loads(fired_file.read_text())) if fired_file.is_file() else None
    return Result(None if proc.returncode == -signal.SIGKILL else proc.returncode, proc.stdout + proc.stderr,
                  fired=fired)


def _child(at: int, fired_file: str, argv: list[str]) -> None:
    from grpokit.cli import main

    with counted(Points(at, "kill", fired_file)):
        code = main(argv)
    sys.exit(code)


# ---------------------------------------------------------------- the checks
def _whole(path: Path, killed: bool) -> str | None:
    """Why a file grpokit wrote is not whole (None: it is)."""
    import yaml

    name = path.name
    try:
        if name.endswith(".json"):
            json.loads(path.read_text(encoding="utf-8"))
        elif name.endswith((".yaml", ".yml")):
            yaml.safe_load(path.read_text(encoding="utf-8"))
        elif name.endswith(".jsonl"):
            lines = path.read_bytes().split(b"\n")
            if lines and lines[-1] == b"":
                lines.pop()
            if killed and name in LOGS and lines:
                lines.pop()  # the line a kill cut: its readers skip it (grpokit.run.files.read_jsonl)
            for line in lines:
                json.loads(line)
        elif name.endswith(".png"):
            data = path.read_bytes()
            if not (data.startswith(b"\x89PNG") and data.endswith(b"IEND\xaeB`\x82")):
                return "a cut PNG"
        elif name.endswith(".html"):
            if not path.read_text(encoding="utf-8").rstrip().endswith("</html>"):
                return "a cut page"
    except (ValueError, UnicodeDecodeError, yaml.YAMLError) as e:
        return f"does not parse ({str(e).splitlines()[0][:80]})"
    return None


def temporaries(work: Path) -> list[str]:
    """The writer's own temporary files (`.NAME.*.tmp`) anywhere in `work`."""
    return sorted(str(p.relative_to(work)) for p in work.rglob(".*.tmp") if p.is_file())


def problems(pipe: Pipeline, i: int, before: dict[str, str], killed: bool) -> list[str]:
    """What is wrong with the folder now: a user file changed, a file of grpokit's cut."""
    out = []
    now = pipe.user_files(after=i)
    out += [f"user file changed: {n}" for n in before if now.get(n) != before[n]]
    for p in pipe.work.rglob("*"):
        rel = str(p.relative_to(pipe.work))
        if p.is_file() and not p.is_symlink() and rel not in before and not p.name.endswith(".tmp"):
            why = _whole(p, killed)
            if why:
                out.append(f"half-written: {rel}: {why}")
    return out


# ---------------------------------------------------------------- one point
@dataclass
class Outcome:
    command: str
    local: int
    kind: str
    path: str
    fault: str
    said: str  # "error+fix", "completed", "killed"
    recovered_by: str | None  # the command that completed after it
    broken: list[str]
    fired: bool = False  # the fault fired at the counted operation and path

    @property
    def cls(self) -> str:
        if self.broken:
            return "BROKEN"
        return f"{self.said}, then {self.recovered_by or 'nothing needed'}"


# Points where a command may complete after its fault fired, each with why that loses nothing: (command, kind,
# a part of the path) -> the reason. Any other point that completes swallowed a failed write: broken.
BEST_EFFORT: dict[tuple[str, str, str], str] = {}


def best_effort(o: Outcome) -> str | None:
    """Why point `o` may complete after its fault (BEST_EFFORT), or None."""
    return next((why for (cmd, kind, part), why in BEST_EFFORT.items()
                 if cmd == o.command and kind in (o.kind, "*") and part in o.path), None)


def own_files(pipe: Pipeline, before: dict[str, str]) -> dict[str, str]:
    """sha256 of grpokit's own files in the folder from the commands before (every file but the user's and the
    writer's temporaries): a failing command must leave each unchanged or replaced whole, never deleted or cut."""
    out = {}
    for f in sorted(pipe.work.rglob("*")):
        rel = str(f.relative_to(pipe.work))
        if f.is_file() and not f.is_symlink() and rel not in before and not f.name.endswith(".tmp") \
                and pipe.model not in f.parents:
            out[rel] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def own_problems(pipe: Pipeline, own: dict[str, str], killed: bool) -> list[str]:
    """grpokit's earlier files a failed command deleted, cut, or shortened (an appended log with fewer bytes)."""
    out = []
    for rel, digest in own.items():
        f = pipe.work / rel
        if not f.is_file():
            out.append(f"grpokit's earlier file gone: {rel}")
        elif hashlib.sha256(f.read_bytes()).hexdigest() != digest:
            snapshot = pipe.snapshots / str(pipe.at) / rel
            why = _whole(f, killed)
            if why:
                out.append(f"grpokit's earlier file cut: {rel}: {why}")
            elif f.name in LOGS and snapshot.is_file() and not f.read_bytes().startswith(snapshot.read_bytes()):
                out.append(f"grpokit's earlier log shortened or rewritten: {rel}")
    return out


def one_point(pipe: Pipeline, i: int, local: int, kind: str, path: str, fault: str) -> Outcome:
    """Command `i` from its copy with its point `local` failing with `fault` (or killed there), then recovered.
    Broken besides `judge`'s checks: the fault did not fire at the counted operation and path; the command
    completed after it fired (off BEST_EFFORT); an earlier file of grpokit's deleted or cut."""
    pipe.restore(i)
    pipe.at = i
    before = pipe.user_files(after=i)
    own = own_files(pipe, before)
    argv = pipe.commands[i][1]
    result = run_killed(pipe, argv, local) if fault == "kill" else run_here(argv, Points(local, fault))
    o = Outcome(pipe.commands[i][0], local, kind, path, fault, "", None, [])
    o.fired = result.fired is not None and same_point(result.fired[1:], (kind, path))
    if result.fired is None:
        o.broken.append(f"the fault did not fire: point #{local} ({kind} {path}) was not reached")
    elif not o.fired:
        o.broken.append(f"the fault fired at #{local} {result.fired[1]} {result.fired[2]}, not at the counted "
                        f"{kind} {path}")
    o.broken += own_problems(pipe, own, killed=fault == "kill")
    o = judge(pipe, i, before, result, o)
    if o.said == "completed" and result.fired is not None and best_effort(o) is None:
        o.broken.append(f"completed after its {fault} fired at {kind} {path}: the failed write was swallowed "
                        "(or add the point to BEST_EFFORT with why that loses nothing)")
    return o


def judge(pipe: Pipeline, i: int, before: dict, result: Result, o: Outcome, fix=None) -> Outcome:
    """What the command said and left, then its recovery (`fix()` first: what the user does, e.g. free space)."""
    killed = o.fault == "kill"
    if TRACEBACK in result.out:
        o.broken.append("traceback: " + result.out[result.out.rfind(TRACEBACK):][-400:].replace("\n", " | "))
    if killed:
        o.said = "killed" if result.code is None else f"exit {result.code} (not killed: point not reached)"
    elif result.code == 0:
        o.said = "completed"
    elif "error:" in result.out and "fix:" in result.out:
        o.said = "error+fix"
    else:
        o.said = f"exit {result.code} without error and fix"
        o.broken.append(o.said + ": " + result.out[-300:].replace("\n", " | "))
    o.broken += problems(pipe, i, before, killed=killed)
    if fix is not None:
        fix()
    if result.code != 0:
        o.recovered_by, more = recover(pipe, i, result)
        o.broken += more
    o.broken += [f"temporary left after recovery: {t}" for t in temporaries(pipe.work)]
    return o


def recover(pipe: Pipeline, i: int, first: Result) -> tuple[str | None, list[str]]:
    """Run what the error's fix names (a killed train: `train --resume`; else the same command); a second fix is
    followed once. (the command that completed, problems)."""
    name, argv = pipe.commands[i]
    result = first
    for _ in range(3):
        fix = result.fix
        if fix is not None:
            cmd = fix.split()
        elif name == "train" and (pipe.work / "run" / "config.yaml").is_file():
            cmd = ["train", "--resume", str(pipe.work / "run")]
        else:
            cmd = argv
        result = run_here(cmd, Points())
        if TRACEBACK in result.out:
            return None, ["traceback in the recovery `grpokit " + " ".join(cmd) + "`: "
                          + result.out[result.out.rfind(TRACEBACK):][-400:].replace("\n", " | ")]
        if result.code == 0:
            return ("the same command" if cmd == argv else "the fix's command") + (
                " (train --resume)" if cmd[:2] == ["train", "--resume"] else ""), []
        if result.fix is None:
            break
    return None, ["not recovered: `grpokit " + " ".join(cmd) + "` ends: " + result.out[-400:].replace("\n", " | ")]


if __name__ == "__main__":  # the killed child: AT -- ARGV
    _child(int(sys.argv[1]), sys.argv[2], sys.argv[4:])
