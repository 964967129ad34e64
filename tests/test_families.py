"""The task family table (grpokit.families): every reward reads a family of it, a recipe's family is its judging
reward's, and the commands that offer families, generators and demos offer the table's."""
from __future__ import annotations

import pytest
import yaml
from conftest import write_jsonl

from grpokit.cli import main
from grpokit.families import FAMILIES, JUDGING_ROLES, demos, family_of, generators
from grpokit.recipe import RewardConfig
from grpokit.rewards import BUILTIN


def test_every_builtin_reward_reads_a_family_of_the_table():
    # A new reward names the family whose answers it reads (`reads`), or reads any completion; a new family is a
    # module and a row of FAMILIES (docs/extending.md "A task family").
    strays = {n: b.reads for n, b in BUILTIN.items() if b.reads != "any" and b.reads not in FAMILIES}
    assert not strays, f"rewards reading no family of grpokit.families.FAMILIES: {strays}"
    assert all(name == f.name for name, f in FAMILIES.items())


def test_every_family_with_a_reward_judging_it_is_found_from_that_reward():
    for name, b in BUILTIN.items():
        if b.role in JUDGING_ROLES and b.reads in FAMILIES:
            assert family_of([RewardConfig(name=name)]) is FAMILIES[b.reads], name


@pytest.mark.parametrize("rewards,family", [
    ([{"name": "format"}, {"name": "math_correctness"}], "math"),  # the judging reward decides, not the first
    ([{"name": "json_fields"}, {"name": "json_schema"}], "json"),
    ([{"name": "reward_model", "params": {"path": "rm"}}, {"name": "direct_answer"}], "preference"),
    ([{"name": "reward_fns:partial_credit", "role": "correctness"}, {"name": "format"}], None),  # own: no family
    ([{"name": "format"}, {"name": "length"}], None),  # nothing judges the answers
])
def test_a_recipes_family_is_the_one_its_judging_reward_reads(rewards, family):
    found = family_of([RewardConfig.model_validate(r) for r in rewards])
    assert (found.name if found else None) == family


def test_data_check_task_offers_the_tables_families(tmp_path, capsys):
    path = write_jsonl(tmp_path / "rows.jsonl", [{"question": "1 + 1?", "answer": "2"}])
    with pytest.raises(SystemExit) as e:
        main(["data", "check", str(path), "--task", "mth"])
    assert e.value.code == 2
    offered = capsys.readouterr().err.split("choose from", 1)[1]
    assert [name.strip(" '\n)") for name in offered.split(",")] == list(FAMILIES)


def test_generate_and_demo_offer_every_familys_generators_and_demos(capsys):
    for argv, names in ((["data", "generate", "poetry", "x.jsonl"], generators()), (["demo", "--task", "poetry"], demos())):
        with pytest.raises(SystemExit):
            main(argv)
        offered = capsys.readouterr().err.split("choose from", 1)[1]
        assert [name.strip(" '\n)") for name in offered.split(",")] == list(names)
    assert set(generators()) == {"arithmetic", "countdown", "json", "calculator"} and "arithmetic" in demos()


def test_a_recipes_family_checks_its_rows_in_recipe_check(tmp_path, capsys):
    # The code family's row check, through the recipe: a row without tests is refused before any model loads.
    write_jsonl(tmp_path / "rows.jsonl", [{"question": "Write add(a, b).", "tests": ["assert add(1, 2) == 3"]},
                                         {"question": "Write sub(a, b).", "answer": "def sub(a, b): return a - b"}])
    (tmp_path / "r.yaml").write_text(yaml.safe_dump({"data": {"train": "rows.jsonl", "eval_fraction": 0},
                                                     "rewards": [{"name": "code_tests"}]}))
    assert main(["recipe", "check", str(tmp_path / "r.yaml")]) == 2
    assert "rows.jsonl:2: no tests: a code task's row needs" in capsys.readouterr().err


def test_no_module_outside_the_package_imports_a_familys_module():
    # docs/extending.md's "nothing else names the new entry": a stage asks the table (a family's row, the family of
    # a recipe, the family whose answers are episodes), never a family's module by name.
    import ast
    from pathlib import Path

    import grpokit.families

    package = Path(grpokit.families.__file__).parent
    modules = {p.stem for p in package.glob("*.py")} - {"__init__", "base"}
    named = []
    for path in sorted(package.parent.rglob("*.py")):
        if package in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "grpokit.families":
                named += [f"{path.name}: {a.name}" for a in node.names if a.name in modules]
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                named += [f"{path.name}: {n}" for n in names if n and n.split(".")[:2] == ["grpokit", "families"]
                          and len(n.split(".")) > 2 and n.split(".")[2] in modules]
    assert not named, f"modules outside grpokit.families naming a family's module: {named}"


@pytest.mark.parametrize("row,first_problem", [
    # A family's own columns are checked whatever the task (no --task here): a code row's tests, a JSON row's
    # schema, a tool row's tool columns; each problem is the family's own.
    ({"question": "Write add.", "tests": ["assert add(1,"]}, "tests 0: does not parse as Python"),
    ({"question": "Name?", "answer": "x", "schema": {"$ref": "http://example.com/s.json"}}, "schema: "),
    ({"question": "1 + 1?", "answer": "2", "env": "calculator", "tools": "not a list"}, "tools"),
])
def test_every_row_gets_the_checks_of_the_family_columns_it_carries(tmp_path, capsys, row, first_problem):
    path = write_jsonl(tmp_path / "rows.jsonl", [row])
    assert main(["data", "check", str(path)]) == 1
    assert f"{path}:1 {first_problem}" in capsys.readouterr().out


def test_the_stages_ask_the_table_for_the_family_they_need():
    from grpokit.families import AnswerForm, AnswerLines, episodes_family, importers, variant_by_name
    from grpokit.families.math import generate

    # the audit: each family's form, answer lines for math; tool episodes' scripted hacks are the episodes family's
    assert isinstance(FAMILIES["math"].audit, AnswerLines) and isinstance(FAMILIES["code"].audit, AnswerForm)
    family = episodes_family()
    assert family is FAMILIES["tools"] and family.hacks is not None and family.columns
    # data perturb / rewrite: the variant of that name that applies to the rows
    rows = generate(4, seed=3)
    assert variant_by_name(rows, "perturbed") is FAMILIES["math"].variants[0]
    assert variant_by_name([{"question": "q", "answer": "1"}], "perturbed") is None
    assert list(importers()) == ["humaneval"]
