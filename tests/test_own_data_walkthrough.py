"""docs/own-data.md, run as written: its files are written, its commands run in order through the CLI.

The page's recipe names the embedded model; here a tiny model from conftest stands in (the one edit made to
the page's files), so the whole walkthrough - data check, an own reward scored offline, recipe check with
the trial call, the audit, four training steps, evaluation and the report - runs in seconds.
"""
from __future__ import annotations

import json
import re
import shlex

import pytest
from conftest import REPO

from grpokit.cli import main

PAGE = REPO / "docs" / "own-data.md"
FILES = re.compile(r'```\w+ title="([^"]+)"\n(.*?)```', re.S)
COMMANDS = re.compile(r"```bash\n(.*?)```", re.S)


def _page():
    text = PAGE.read_text(encoding="utf-8")
    files = FILES.findall(text)
    commands = [line.strip() for block in COMMANDS.findall(text) for line in block.splitlines()
                if line.strip().startswith("grpokit ")]
    return files, commands


def test_the_page_has_its_files_and_commands():
    files, commands = _page()
    assert {name for name, _ in files} == {"data/train.jsonl", "my_rewards.py", "data/completions.jsonl", "my.yaml"}
    assert [c.split()[1] for c in commands] == ["data", "rewards", "recipe", "rewards", "preflight", "train", "eval",
                                                "report"]
    assert "own-data.md" in (REPO / "mkdocs.yml").read_text()  # in the site's nav


@pytest.fixture(autouse=True)
def _fresh_module(monkeypatch):
    import sys

    monkeypatch.delitem(sys.modules, "my_rewards", raising=False)  # the page's module, imported afresh per test
    yield
    sys.modules.pop("my_rewards", None)


def test_the_walkthrough_runs_end_to_end(tmp_path, monkeypatch, capsys, tiny_model_dir):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # `my_rewards` imported from the folder, as a user's shell would
    files, commands = _page()
    for name, body in files:
        if name == "my.yaml":
            assert "model: {name: default}" in body
            body = body.replace("model: {name: default}", f"model: {{name: {tiny_model_dir}}}")
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(body, encoding="utf-8")
    outputs = {}
    for command in commands:
        argv = shlex.split(command)[1:]
        code = main(argv)
        captured = capsys.readouterr()
        assert code == 0, f"{command}\n{captured.out}\n{captured.err}"
        assert "Traceback" not in captured.err
        outputs[" ".join(argv[:2])] = captured.out + captured.err
    # what the page says each command prints
    assert "0 warnings" in outputs["data check"] and "12 usable rows" in outputs["data check"]
    scores = [json.loads(line)["reward"] for line in outputs["rewards score"].splitlines() if line.startswith("{")]
    assert scores == pytest.approx([0.0, -0.2])
    assert "my_rewards:chatter (own, penalty)" in outputs["recipe check"]
    assert "no trick scored as much as an honest wrong answer" in outputs["rewards audit"]
    metrics = [json.loads(x) for x in (tmp_path / "runs/my/metrics.jsonl").read_text().splitlines()]
    assert any("rewards/chatter/mean" in m for m in metrics)
    assert (tmp_path / "runs/my/eval/best.json").is_file()
    page = (tmp_path / "runs/my/report/report.html").read_text(encoding="utf-8")
    assert "my_rewards:chatter" in page and "None ×" not in page


def test_the_pages_mistakes_are_the_messages_grpokit_prints(tmp_path, monkeypatch, capsys):
    # The page's table of mistakes: the misspelt param, as recipe check reports it.
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    files, _ = _page()
    for name, body in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(body.replace("per_line: 0.05", "per_lne: 0.05"), encoding="utf-8")
    assert main(["recipe", "check", "my.yaml"]) == 2
    err = capsys.readouterr().err
    assert "rewards.2.params.per_lne: chatter() has no parameter 'per_lne'" in err
    assert "did you mean 'per_line'?" in err and "rewards.2.params.per_lne" in PAGE.read_text()
