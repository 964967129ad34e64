"""docs/extending.md, built: the guide's examples are applied to a copy of the project and their tests run there
(and import-linter's contracts checked on it), then the whole fast tier of the suite in that copy, so the page shows
code that works with the tables as they are, and an example that breaks anything else (a test that walks a table
the example adds a row to) fails here, not in a user's checkout.

Every ```python block of the page carries a title that says what to do with it:
  "src/PATH"                      a new file, written whole (it must not exist yet);
  "PATH, a row of TABLE"          lines added at the end of that table (a dict or list: the line `TABLE... = {` or
                                  `TABLE... = [`), in src/ or tests/;
  "src/PATH, above NAME"          code added above the first line that starts with NAME;
  "src/PATH, an import"           a line added above the module's first `from grpokit` import;
  "tests/PATH"                    a test, run with pytest in the copy (with this folder's conftest.py).
Then, as the page's "Before a pull request" says, `scripts/recipe_reference.py` rewrites the schema reference.

Cost: the examples' own tests and lint-imports take about a minute; the fast tier in the copy as long as the fast
tier itself (docs/tests.md), which is why that test is in the slow tier.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "extending.md"
BLOCK = re.compile(r'^```python title="([^"]+)"\n(.*?)^```$', re.M | re.S)
# The extension points the page walks through, each by the test of its example.
EXAMPLES = {"reward": "tests/test_exact_word.py", "task family": "tests/test_word_family.py",
            "health detector": "tests/test_grad_norm_spike.py", "generation backend": "tests/test_one_by_one.py",
            "demo": "tests/test_arithmetic_quick.py"}
# What the copy holds: what the suite reads (the code, its tests, the docs and recipes they check, the config).
COPIED = ("src", "tests", "docs", "recipes", "scripts", "benchmarks", "experiments", ".ci", "pyproject.toml", "mkdocs.yml",
          "README.md", "LICENSE")


def blocks() -> list[tuple[str, str]]:
    return BLOCK.findall(PAGE.read_text(encoding="utf-8"))


def apply(root: Path, title: str, code: str) -> None:
    """One block of the page, applied to the copy at `root` as its title says (module docstring)."""
    path, _, where = title.partition(", ")
    target = root / path
    if not where:
        assert not target.exists(), f"{path} exists already: the guide's example would replace it"
        target.write_text(code, encoding="utf-8")
        return
    lines = target.read_text(encoding="utf-8").splitlines(keepends=True)
    if where.startswith("a row of "):
        table = where.removeprefix("a row of ")
        start = next(i for i, line in enumerate(lines) if re.match(rf"{table}\b.*= [{{\[]$", line))
        close = "}" if lines[start].rstrip().endswith("{") else "]"
        at = next(i for i, line in enumerate(lines) if i > start and line.rstrip() == close)  # the last row's place
        new = ["    " + line if line.strip() else line for line in code.splitlines(keepends=True)]
    elif where.startswith("above "):
        at = next(i for i, line in enumerate(lines) if line.startswith(where.removeprefix("above ")))
        new = [code, "\n\n"]
    elif where == "an import":
        at = next(i for i, line in enumerate(lines) if line.startswith("from grpokit"))
        new = [code]
    else:
        raise AssertionError(f"a block titled {title!r}: the test knows no such place (module docstring)")
    target.write_text("".join(lines[:at] + new + lines[at:]), encoding="utf-8")


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Path:
    """The project with every example of the page added, as the page says."""
    root = tmp_path_factory.mktemp("extended")
    for name in COPIED:
        source = REPO / name
        if source.is_symlink():  # recipes/ links to the package's recipes: a link in the copy too
            (root / name).symlink_to(os.readlink(source))
        elif source.is_dir():
            # runs/: run folders an experiment wrote (experiments/runs), outputs rather than the project
            shutil.copytree(source, root / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "runs"))
        else:
            shutil.copy(source, root / name)
    for title, code in blocks():
        apply(root, title, code)
    # ... and the page's "Before a pull request": the schema reference rewritten (a health code's thresholds are on it)
    subprocess.run([sys.executable, "scripts/recipe_reference.py"], cwd=root, check=True, capture_output=True,
                   env={**os.environ, "PYTHONPATH": str(root / "src")}, timeout=120)
    return root


def _pytest(root: Path, *args: str, timeout: int) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_every_block_says_where_it_goes_and_each_extension_point_has_an_example():
    text = PAGE.read_text(encoding="utf-8")
    assert text.count("```python") == len(blocks()), "a ```python block without a title: say where it goes"
    titles = [t for t, _ in blocks()]
    for point, test in EXAMPLES.items():
        assert test in titles, f"the {point} example has no test ({test})"
    for title in titles:
        path, _, where = title.partition(", ")
        assert path.startswith(("src/grpokit/", "tests/")), title
        assert not where or where.startswith(("a row of ", "above ")) or where == "an import", title
        if where:
            assert (REPO / path).is_file(), f"{title}: {path} does not exist"


def test_the_examples_work_when_added_as_the_page_says(copy):
    tests = sorted(EXAMPLES.values())
    res = _pytest(copy, *tests, timeout=900)
    assert res.returncode == 0, res.stdout[-6000:] + res.stderr[-3000:]
    count = sum(code.count("\ndef test_") for title, code in blocks() if title.startswith("tests/"))
    assert res.stdout.splitlines()[-1].startswith(f"{count} passed"), res.stdout[-3000:]  # none skipped
    # ... and they keep the layers: the import-linter contracts hold with them added
    lint = Path(sys.executable).with_name("lint-imports")
    if lint.is_file():
        res = subprocess.run([str(lint)], cwd=copy, env={**os.environ, "PYTHONPATH": str(copy / "src")},
                             capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stdout[-3000:]


@pytest.mark.slow
def test_the_whole_fast_tier_passes_with_the_examples_added(copy):
    # This file is left out (it would copy the copy); the slow tier trains the embedded model and reads no table
    # an example adds a row to. The package map's test is too: it holds docs/layout.md to grpokit's own modules,
    # and an example is a user's (a module meant to ship gets its line there: docs/extending.md says so).
    res = _pytest(copy, "-x", "-m", "not slow", "--ignore", "tests/test_extending.py", "--deselect",
                  "tests/test_layout_doc.py::test_the_package_map_names_every_module", "tests", timeout=3600)
    tail = res.stdout.splitlines()[-1] if res.stdout else ""
    assert res.returncode == 0 and " passed" in tail and "failed" not in tail, res.stdout[-6000:] + res.stderr[-3000:]
