"""The docs stay true to the code: the recipe reference is generated from the schema, and every field has help."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "recipe_reference.py"


def _script():
    spec = importlib.util.spec_from_file_location("recipe_reference", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_recipe_reference_page_is_the_generated_one():
    res = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr  # stale: run `python scripts/recipe_reference.py`


def test_every_recipe_field_is_on_the_reference_page():
    from grpokit.recipe import HealthConfig, Recipe

    page = (REPO / "docs" / "recipes" / "reference.md").read_text(encoding="utf-8")
    for name in [*Recipe.model_fields, *HealthConfig.model_fields]:
        if not Recipe.model_fields.get(name, HealthConfig.model_fields.get(name)).exclude:
            assert f"| `{name}` |" in page, name


def test_a_field_without_a_description_fails_the_generator(monkeypatch):
    from pydantic import Field

    from grpokit.recipe import schema
    from grpokit.recipe.section import Section

    class Undocumented(Section):
        documented: int = Field(1, description="has help")
        bare: int = 2

    module = _script()
    monkeypatch.setattr(module, "Recipe", type("R", (Section,), {"__annotations__": {"x": Undocumented},
                                                                "x": Field(default_factory=Undocumented,
                                                                           description="a section")}))
    with pytest.raises(SystemExit, match="Undocumented.bare"):
        module.render()
    assert schema.Recipe.model_fields  # the real schema is untouched


def test_the_demo_time_has_one_source():
    """grpokit.DEMO_TIME is the demo's time everywhere a user reads it (issue 35: 12.3 min in the README, ~15 min in
    --help and install.sh, 12-16 min in the recipe); docs/measurements.md keeps the dated runs it sums up."""
    from grpokit import DEMO_TIME
    from grpokit.cli import build_parser

    shown = {
        "README.md": (REPO / "README.md").read_text(),
        "docs/quickstart.md": (REPO / "docs" / "quickstart.md").read_text(),
        "recipes/smollm2-arithmetic.yaml": (REPO / "recipes" / "smollm2-arithmetic.yaml").read_text(),
        "docs/recipes/index.md": (REPO / "docs" / "recipes" / "index.md").read_text(),
        "grpokit --help": build_parser().format_help(),
    }
    for where, text in shown.items():
        text = " ".join(text.split())  # help and Markdown wrap lines
        assert DEMO_TIME in text, where
        assert "about 15 min" not in text, where
        for stale in ("5-7 min", "5–7 min", "14–16 min"):  # the times of issue 68: one per page
            assert stale not in text, (where, stale)
    install = (REPO / "scripts" / "install.sh").read_text()
    assert "grpokit.DEMO_TIME" in install and "15 minutes" not in install


def test_no_help_text_sends_the_reader_to_the_readme_for_a_docs_page():
    """`export --help` said "see README" for what docs/export.md explains: help names the page."""
    import argparse

    from grpokit.cli import build_parser

    def helps(parser):
        yield parser.format_help()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    yield from helps(sub)

    texts = list(helps(build_parser()))
    assert len(texts) > 20 and not [t for t in texts if "see README" in t]
    export = next(t for t in texts if "--quant" in t)
    assert "docs/export.md" in " ".join(export.split())


def test_the_suites_size_on_the_tests_page_is_the_suites_own_count():
    """docs/tests.md gives the suite's size and the slow tier's; here pytest counts them (one collection, no test
    run), and the page must be within a tenth of both: a page that said 1,605 tests of a 2,300-test suite fails."""
    import re

    page = " ".join((REPO / "docs" / "tests.md").read_text(encoding="utf-8").split())
    said = re.search(r"holds about ([\d,]+) tests, about (\d+) of them in the slow tier", page)
    assert said, "docs/tests.md: say the suite's size as 'holds about N tests, about M of them in the slow tier'"
    res = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", "slow",
                          str(REPO / "tests")], capture_output=True, text=True, cwd=REPO, timeout=600)
    counted = re.search(r"(\d+)/(\d+) tests collected", res.stdout)
    assert counted, res.stdout[-2000:] + res.stderr[-2000:]
    slow, total = int(counted.group(1)), int(counted.group(2))
    for figure, count in ((int(said.group(1).replace(",", "")), total), (int(said.group(2)), slow)):
        assert abs(figure - count) <= count / 10, f"docs/tests.md says about {figure}; the suite has {count}: update it"


def test_the_license_file_is_the_one_pyproject_names():
    """pyproject says `license = "Apache-2.0"`; the repository carries that licence's text (issue 68: it had none)."""
    import tomllib

    spdx = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["license"]
    text = (REPO / "LICENSE").read_text()
    assert spdx == "Apache-2.0"
    assert " ".join(text.split()[:5]) == "Apache License Version 2.0, January"
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text and "END OF TERMS AND CONDITIONS" in text
