"""The repository-fix environment: edit a small Python project until its tests pass.

    grpokit train recipes/smollm2-repofix.yaml

Each episode (one TRL rollout) copies the row's bundled project
(`datasets/tools/repos/<repo>/project/`) into a fresh temporary folder. Tools:
`list_files`, `read_file`, `write_file`, `run_tests` (the visible tests in
`tests.py`, one assert per line, run through grpokit's bubblewrap sandbox).
Every tool call uses one step of the budget (`max_steps`); over budget, a
tool raises, which TRL reports to the model and counts as a tool failure.

The reward (`task_success`, through `_goal_score`) is the share of the HIDDEN
tests (`hidden.json`, never copied into the workspace) that pass, run in the
sandbox against the declared source files of the workspace only. So:

- editing `tests.py`, or adding `conftest.py`/`sitecustomize.py`/new modules,
  changes nothing the reward reads;
- `run_tests` takes no arguments: a call with altered arguments fails (TRL's
  tool error) and runs nothing;
- `write_file` refuses absolute paths and paths that leave the project;
- the verdict comes from the sandbox's judge, never from the code's output.

These are the tool-hack cases of `grpokit.audit.tools`. Not covered:
a fix that hard-codes the hidden tests' expected values (the tests' weakness),
multi-module projects that import each other (the sandbox runs one module: the
declared sources are concatenated in order).
"""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from grpokit.envs.rows import REPOS_DIR, loads
from grpokit.sandbox import Limits, TestSpec, run_tests

_MAX_READ_CHARS = 4000  # a tool result is prompt tokens for the next turn; tiny projects stay far below
_LIMITS = Limits(timeout_s=10.0, cpu_s=5)


def load_repo(name: str) -> dict:
    """A bundled repository's manifest: source files, hidden tests, task text, project folder."""
    meta = json.loads((REPOS_DIR / name / "hidden.json").read_text(encoding="utf-8"))
    return {**meta, "name": name, "project": REPOS_DIR / name / "project"}


def _asserts(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]


class RepoFixEnv:
    def __init__(self, max_steps: int = 8, sandbox: str = "bwrap"):
        self.max_steps = max_steps
        self.sandbox = sandbox
        self.root: Path | None = None
        self.repo: dict | None = None
        self.steps = 0
        self._score: float | None = None

    def reset(self, **row) -> None:
        self._cleanup()
        goal = loads(row.get("goal")) or {}
        self.repo = load_repo(goal["repo"])
        self.root = Path(tempfile.mkdtemp(prefix=f"grpokit-repofix-{self.repo['name']}-"))
        shutil.copytree(self.repo["project"], self.root, dirs_exist_ok=True)
        self.steps = 0
        self._score = None
        return None

    def _cleanup(self) -> None:
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def __del__(self):
        self._cleanup()

    def _step(self) -> None:
        if self.root is None:
            raise RuntimeError("no episode: reset() first")
        if self.steps >= self.max_steps:
            raise RuntimeError(f"step budget of {self.max_steps} tool calls used up; give your final answer")
        self.steps += 1
        self._score = None  # the workspace may change

    def _path(self, path: str) -> Path:
        p = Path(path)
        target = (self.root / p).resolve()
        if p.is_absolute() or not target.is_relative_to(self.root.resolve()):
            raise ValueError(f"{path!r} is outside the project; use a path relative to the project folder")
        return target

    def _run(self, asserts: list[str]):
        code = "\n\n".join((self.root / s).read_text(encoding="utf-8") if (self.root / s).is_file() else ""
                           for s in self.repo["source"])
        return run_tests(code, TestSpec.from_asserts(asserts), limits=_LIMITS, isolation=self.sandbox)

    def list_files(self) -> str:
        """List the files of the project, one path per line."""
        self._step()
        return "\n".join(sorted(str(p.relative_to(self.root)) for p in self.root.rglob("*") if p.is_file()))

    def read_file(self, path: str) -> str:
        """Read a file of the project.

        Args:
            path: The file's path relative to the project folder, e.g. "tests.py".
        """
        self._step()
        return self._path(path).read_text(encoding="utf-8")[:_MAX_READ_CHARS]

    def write_file(self, path: str, content: str) -> str:
        """Replace the whole content of a file of the project (or create it).

        Args:
            path: The file's path relative to the project folder.
            content: The complete new content of the file.
        """
        self._step()
        target = self._path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        return f"wrote {len(content)} characters to {path}"

    def run_tests(self) -> str:
        """Run the project's tests (tests.py) and report which pass."""
        self._step()
        tests = self.root / "tests.py"
        asserts = _asserts(tests.read_text(encoding="utf-8")) if tests.is_file() else []
        if not asserts:
            return "no tests found in tests.py"
        try:
            result = self._run(asserts)
        except ValueError as e:  # a test line that does not parse (the model edited tests.py)
            return f"tests.py does not parse: {e}"
        lines = [f"{result.passed}/{result.total} tests passed"]
        if result.error:
            lines.append(f"error: {result.error}")
        lines += [f"FAILED {t}" for t in result.failed_tests[:3]]
        return "\n".join(lines)

    def _goal_score(self) -> float:
        """Share of the hidden tests passing on the workspace's declared sources (the episode's reward).

        Private on purpose: TRL exposes every public method as a tool; `task_success` calls this."""
        if self._score is None:
            self._score = self._run(list(self.repo["tests"])).fraction
        return self._score

