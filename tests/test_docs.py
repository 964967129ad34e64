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
