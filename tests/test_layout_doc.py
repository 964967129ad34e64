"""docs/layout.md's layer table is import-linter's contract (pyproject.toml), layer by layer, and its package map and
the README's file map name every module of src/grpokit (a new file, or a moved one, shows up here until the maps
say where it is)."""
from __future__ import annotations

import re
import tomllib

from conftest import REPO

LAYOUT = (REPO / "docs" / "layout.md").read_text(encoding="utf-8")
README = (REPO / "README.md").read_text(encoding="utf-8")
SRC = REPO / "src" / "grpokit"


def _contract_layers() -> list[set[str]]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    (layers,) = [c["layers"] for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    return [{p.strip().removeprefix("grpokit.") for p in layer.split("|")} for layer in layers]


def test_the_layer_table_is_the_contract():
    rows = re.findall(r"^\| (\d+) \| (.+) \|$", LAYOUT, re.M)
    documented = [set(re.findall(r"`(\w+)`", re.sub(r"\([^)]*\)", "", packages))) for _, packages in rows]
    assert [int(n) for n, _ in rows] == list(range(1, len(rows) + 1))
    assert documented == _contract_layers()


def test_the_package_map_names_every_module():
    block = LAYOUT.split("```", 2)[1]
    missing = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        if rel.parts[0] == "datasets" or rel.name == "__init__.py":
            continue
        if rel.name not in block:
            missing.append(str(rel))
    assert not missing, f"docs/layout.md's package map does not name: {missing}"


def test_the_readme_file_map_names_every_package_and_top_level_module():
    block = README.split("## File map", 1)[1].split("```", 2)[1]
    names = sorted(p.name + "/" for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").is_file()) + \
        sorted(p.name for p in SRC.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    missing = [n for n in names if n not in block]
    assert not missing, f"the README's file map does not name: {missing}"
