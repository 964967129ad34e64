"""Issue 44: one writer. Every file and folder a command writes goes through grpokit.run.writer; this test reads
src/ and fails on any other write (`open(..., "w")`, `write_text`, `shutil.rmtree`, `os.replace`, ...) outside the
few places that write only into a temporary folder of their own or grpokit's cache, each listed with its reason.
The writer's own rules are then tried on real files: a link, a hard link, an existing file, the command's own input.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from grpokit.errors import GrpokitError
from grpokit.run import reads, writer

SRC = Path(__file__).resolve().parents[1] / "src" / "grpokit"
WRITER = SRC / "run" / "writer.py"

# What writes, moves or deletes a file or folder (reading is fine: `open(path)`, `read_text`).
WRITES = re.compile(r"""(\bopen\([^)]*["'][wax]b?\+?["']|\.open\(\s*["'][wax]|\.write_text\(|\.write_bytes\(|"""
                    r"""shutil\.(rmtree|move|copy|copy2|copyfile|copytree)\(|os\.(replace|rename|remove|unlink|"""
                    r"""link|symlink|makedirs)\(|\.rename\(|\.unlink\(|\.mkdir\(|\.touch\(|\.savefig\(|"""
                    r"""\.symlink_to\(|\.hardlink_to\()""")

# (file, text on the line): writes outside the writer, each into a place no user named, with why.
ALLOWED = [
    ("generation/vllm_backend.py", "shutil.rmtree(tmp", "the weights handed to vLLM, in a mkdtemp folder of its own"),
    ("envs/repofix.py", "shutil.copytree(self.repo", "an episode's working copy, in a mkdtemp folder of its own"),
    ("envs/repofix.py", "shutil.rmtree(self.root", "the same temporary working copy, removed"),
    ("envs/repofix.py", "target.parent.mkdir(", "the model's edit, inside the episode's temporary copy"),
    ("envs/repofix.py", "target.write_text(", "the model's edit, inside the episode's temporary copy"),
    ("export/hub.py", "dst.parent.mkdir(", "the Hub upload's staging folder, a TemporaryDirectory"),
    ("export/hub.py", "os.link(src, dst)", "the Hub upload's staging folder, a TemporaryDirectory"),
    ("export/hub.py", "shutil.copy2(src, dst)", "the Hub upload's staging folder, a TemporaryDirectory"),
    ("export/hub.py", '(staging / "README.md").write_text(', "the Hub upload's staging folder, a TemporaryDirectory"),
    ("training/rollback.py", "os.link(f, tmp / f.name)", "reference.tmp/, a folder set_reference just made"),
    ("training/rollback.py", "shutil.copy2(f, tmp / f.name)", "reference.tmp/, a folder set_reference just made"),
    ("run/ownership.py", "os.unlink(name)", "writable_problem's probe: a mkstemp file of its own"),
    ("run/locks.py", "os.unlink(self.path)", "the run's lock file, created by this process with O_EXCL"),
    ("run/temporaries.py", "path.unlink()", "the writer's own temporary file, left by a process that is gone"),
    ("run/temporaries.py", "shutil.rmtree(path", "a staging folder of the writer's, left by a process that is gone"),
    ("report/plots.py", "fig.savefig(png", "a plot drawn into memory; write_file puts it in place"),
    ("console.py", "self.touch()", "Heartbeat.touch: resets a clock, no file"),
    ("training/tracking.py", "self.heartbeat.touch()", "Heartbeat.touch: resets a clock, no file"),
]


def _stray_writes() -> list[str]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path == WRITER:
            continue
        rel = path.relative_to(SRC).as_posix()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if code.lstrip().startswith((">>>", "...")) or not WRITES.search(code):
                continue  # a docstring example writes into its own temporary folder
            if any(rel == f and snippet in code for f, snippet, _ in ALLOWED):
                continue
            found.append(f"{rel}:{n}: {line.strip()}")
    return found


def test_every_write_goes_through_the_one_writer():
    stray = _stray_writes()
    assert stray == [], "write through grpokit.run.writer (write_file, new_file, write_rows, append_file, " \
                        "make_folder, remove), or list the line in ALLOWED with why no user's file is reached:\n" \
                        + "\n".join(stray)


def test_the_allowed_list_names_lines_that_exist():
    """An entry whose line is gone would let a new write in that file pass unnoticed: every one still matches."""
    text = {f: (SRC / f).read_text(encoding="utf-8") for f, _, _ in ALLOWED}
    assert [(f, s) for f, s, _ in ALLOWED if s not in text[f]] == []


def test_the_grep_finds_what_it_must():
    for line in ['open(path, "w")', "open(p, 'wb')", 'p.open("a")', "p.write_text(x)", "shutil.rmtree(p)",
                 "os.replace(a, b)", "p.unlink()", "fig.savefig(path)", "p.mkdir(parents=True)"]:
        assert WRITES.search(line), line
    for line in ["open(path)", 'open(path, "rb")', "p.read_text()", "json.loads(p.read_bytes())"]:
        assert not WRITES.search(line), line


# ---------------------------------------------------------------- the writer's rules, on real files
@pytest.fixture
def user(tmp_path) -> Path:
    mine = tmp_path / "thesis.txt"
    mine.write_text("my thesis")
    return mine


CASES = [  # (what sits at the output's name, words of the refusal)
    ("a symbolic link", lambda out, mine: out.symlink_to(mine), "is a symbolic link"),
    ("a dangling link", lambda out, mine: out.symlink_to(out.parent / "nowhere"), "is a symbolic link"),
    ("a hard link", lambda out, mine: os.link(mine, out), "other hard link"),
    ("an existing file", lambda out, mine: out.write_text("my notes"), "already exists"),
    ("a folder", lambda out, mine: out.mkdir(), "is a folder"),
    ("a FIFO", lambda out, mine: os.mkfifo(out), "not a regular file"),
]


@pytest.mark.parametrize("name,make,words", CASES, ids=[c[0] for c in CASES])
def test_a_user_named_output_is_never_written_through(tmp_path, user, name, make, words):
    out = tmp_path / "out.jsonl"
    make(out, user)
    before = {p.name: (p.read_bytes() if p.is_file() and not p.is_fifo() else None) for p in tmp_path.iterdir()}
    with pytest.raises(GrpokitError) as e:
        writer.write_rows(out, [{"a": 1}])
    (p,) = e.value.problems
    assert p.where == str(out) and words in p.message and p.fix, p
    assert user.read_text() == "my thesis"
    after = {p.name: (p.read_bytes() if p.is_file() and not p.is_fifo() else None) for p in tmp_path.iterdir()}
    assert after == before  # nothing written, no temporary file left


def test_the_commands_own_input_is_never_replaced_even_with_overwrite(tmp_path, user):
    alias = tmp_path / "alias"
    alias.symlink_to(tmp_path)  # the same file by another path: caught by the resolved path
    with reads.command():
        reads.reading(user)
        for target in (user, alias / user.name):
            with pytest.raises(GrpokitError) as e:
                writer.write_file(target, "x", replace=True)
            assert "is a file this command reads" in e.value.problems[0].message
    assert user.read_text() == "my thesis"
    writer.write_file(user, "replaced", replace=True)  # outside the command: an ordinary file of the user's
    assert user.read_text() == "replaced"


def test_a_written_file_has_the_users_umask_and_is_whole(tmp_path):
    old = os.umask(0o027)
    try:
        path = writer.write_file(tmp_path / "new.json", "{}")
    finally:
        os.umask(old)
    assert oct(path.stat().st_mode & 0o777) == oct(0o640) and path.read_text() == "{}"


def test_an_error_while_writing_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text("old\n")

    def rows():
        yield {"a": 1}
        raise RuntimeError("cut")

    with pytest.raises(RuntimeError):
        writer.write_rows(path, rows(), replace=True)
    assert path.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["rows.jsonl"]


def test_a_full_disk_is_an_error_not_an_empty_file(tmp_path):
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    with pytest.raises(GrpokitError) as e:  # a device is not a file grpokit replaces
        writer.write_rows("/dev/full", [{"a": 1}], replace=True)
    assert "not a regular file" in e.value.problems[0].message


def test_within_a_grpokit_folder_a_linked_subfolder_is_refused(tmp_path, user):
    run = tmp_path / "run"
    run.mkdir()
    (run / "report").symlink_to(user.parent)  # RUN/report a link to the user's folder
    with pytest.raises(GrpokitError) as e:
        writer.write_file(run / "report" / "report.html", "<html>", within=run)
    assert e.value.problems[0].where == str(run / "report") and "symbolic link" in e.value.problems[0].message
    assert not (user.parent / "report.html").exists()


def test_a_user_named_output_inside_a_run_is_refused(tmp_path):
    from conftest import grpokit_run

    run = grpokit_run(tmp_path / "run")
    for name in ("metrics.jsonl", "checkpoints/checkpoint-1/x.json", "eval/mine.jsonl"):
        with pytest.raises(GrpokitError) as e:
            writer.write_rows(run / name, [], replace=True)
        assert "a grpokit run folder" in e.value.problems[0].message
    writer.write_rows(run / "my-notes.jsonl", [{"a": 1}])  # a name of the user's own, beside the run's: theirs


# ---------------------------------------------------------------- issue 67: files libraries write into a run folder
def _planted(run: Path, name: str, how: str, user: Path) -> Path:
    link = run / "checkpoints" / name
    link.parent.mkdir(parents=True, exist_ok=True)
    (os.symlink if how == "symbolic" else os.link)(user, link)
    return link


def _sft_trainer(model_dir: Path, tokenizer, output_dir: Path):
    from datasets import Dataset
    from trl import SFTConfig

    from grpokit.training.logps import TreeLogps
    from grpokit.training.trainer import GrpokitSFTTrainer

    args = SFTConfig(output_dir=str(output_dir), report_to="none", use_cpu=True, max_steps=1, max_length=32)
    rows = Dataset.from_list([{"prompt": "1 + 1 =", "completion": " 2"}] * 2)
    return GrpokitSFTTrainer(TreeLogps(False, 32, "SFT loss"), lambda _: None, model=str(model_dir), args=args,
                             train_dataset=rows, processing_class=tokenizer)


@pytest.mark.parametrize("trainer_kind", ["grpo", "sft"])
@pytest.mark.parametrize("how", ["symbolic", "hard"])
def test_trl_model_card_never_goes_through_a_link(tmp_path, tiny_model_dir, tokenizer, trainer_kind, how):
    # The re-test's escape: TRL's create_model_card (called by _save_checkpoint of both trainers) saved
    # RUN/checkpoints/README.md by name, so a link planted there overwrote the user's file it points at.
    from conftest import grpo_trainer, grpokit_run

    run = grpokit_run(tmp_path / "run")
    user = tmp_path / "thesis.md"
    user.write_text("mine")
    trainer = grpo_trainer(tiny_model_dir, tokenizer, run / "checkpoints", per_device_train_batch_size=2,
                           num_generations=2, max_completion_length=4) if trainer_kind == "grpo" \
        else _sft_trainer(tiny_model_dir, tokenizer, run / "checkpoints")
    trainer.create_model_card(model_name="run")  # no link: TRL's card, written whole
    assert "run" in (run / "checkpoints" / "README.md").read_text()
    (run / "checkpoints" / "README.md").unlink()
    _planted(run, "README.md", how, user)
    with pytest.raises(GrpokitError, match="README.md"):
        trainer.create_model_card(model_name="run")
    assert user.read_text() == "mine"
    # a checkpoint folder planted as a link (or holding a linked file): refused before transformers writes it
    (run / "checkpoints" / "README.md").unlink()
    folder = tmp_path / "my-folder"
    folder.mkdir()
    (run / "checkpoints" / "checkpoint-0").symlink_to(folder) if how == "symbolic" else \
        (run / "checkpoints" / "checkpoint-0").mkdir() or os.link(user, run / "checkpoints" / "checkpoint-0" / "config.json")
    with pytest.raises(GrpokitError, match="checkpoint-0"):
        trainer._save_checkpoint(trainer.model, None)
    assert list(folder.iterdir()) == [] and user.read_text() == "mine"
    assert not (run / "checkpoints" / "README.md").exists()
