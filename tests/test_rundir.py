"""The run directory type: crash-tolerant JSONL, checkpoint discovery and specs, the lock, damaged checkpoints.

No training here (tests/test_crash_safety.py trains tiny runs); files are written by hand as a crash leaves them.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grpokit.cli import main
from grpokit.errors import GrpokitError
from grpokit.run.checkpoints import COMPLETE_MARKER, checkpoint_damage, nonfinite_weights, step_of
from grpokit.run.locks import RunLock
from grpokit.run.files import read_jsonl, split_jsonl
from grpokit.run.rundir import RunDir
from grpokit.run.steps import select_steps
from grpokit.run.safety import disk_full_problem, is_disk_full

REC = [{"step": 1, "reward": 0.5}, {"step": 2, "reward": 0.7}]
WHOLE = b"".join(json.dumps(r).encode() + b"\n" for r in REC)

READ_CASES = [  # (file bytes, records read, notes)
    (WHOLE, REC, 0),                                                  # whole lines
    (WHOLE + b'{"step": 3, "rew', REC, 1),                            # a crash cut the last line
    (WHOLE + b'{"step": 3, "rew\n', REC, 1),                          # ... and a later append added its newline
    (json.dumps(REC[0]).encode() + b"\nnot json\n" + json.dumps(REC[1]).encode() + b"\n", REC, 1),  # corrupt middle
    (WHOLE + b"\xff\xfe\n", REC, 1),                                  # bytes that are not UTF-8
    (WHOLE + b"[1, 2]\n", REC, 1),                                    # JSON, but not a record
    (b"\n" + WHOLE + b"\n\n", REC, 0),                                # blank lines are not errors
    (b"", [], 0),                                                     # empty file
    ('{"step": 1, "c": "a\u2028b"}\n'.encode(), [{"step": 1, "c": "a\u2028b"}], 0),  # U+2028 inside a string
]


@pytest.mark.parametrize("data,records,notes", READ_CASES)
def test_read_jsonl_skips_partial_lines_with_one_note(tmp_path, data, records, notes):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(data)
    said = []
    assert read_jsonl(path, note=said.append) == records
    assert len(said) == notes
    if notes:
        assert str(path) in said[0] and "\n" not in said[0]


def test_read_jsonl_of_a_missing_file_is_empty(tmp_path):
    assert read_jsonl(tmp_path / "nope.jsonl", note=pytest.fail) == []


SPLIT_CASES = [  # (max_step, steps kept, steps returned as dropped)
    (2, [1, 2], []),     # nothing after the checkpoint
    (1, [1], [2]),       # resume from step 1 redoes step 2
    (0, [], [1, 2]),     # resume from the initial model
]


@pytest.mark.parametrize("max_step,kept,dropped", SPLIT_CASES)
def test_split_jsonl_keeps_whole_records_up_to_the_step(tmp_path, max_step, kept, dropped):
    path = tmp_path / "samples.jsonl"
    path.write_bytes(WHOLE + b'{"step": 3, "comp')  # the half line always goes
    out = split_jsonl(path, max_step, note=lambda _: None)
    assert [json.loads(x)["step"] for x in out] == dropped
    assert [r["step"] for r in read_jsonl(path, note=pytest.fail)] == kept


STEP_CASES = [("checkpoint-12", 12), ("checkpoint-0", 0), ("checkpoint-x", None), ("checkpoint-3.bak", None),
              ("checkpoint-", None), ("run-3", None), ("/a/b/checkpoint-7", 7)]


@pytest.mark.parametrize("name,step", STEP_CASES)
def test_step_of_parses_checkpoint_folder_names_only(name, step):
    assert step_of(name) == step


def _run_with(tmp_path: Path, complete=(1, 2, 10), incomplete=(11,), odd=("checkpoint-x", "checkpoint-3.bak")) -> RunDir:
    run = RunDir(tmp_path / "run")
    for s in (*complete, *incomplete):
        run.checkpoint_path(s).mkdir(parents=True)
        if s in complete:
            (run.checkpoint_path(s) / COMPLETE_MARKER).write_text("{}")
    for name in odd:
        (run.checkpoints_dir / name).mkdir()
        (run.checkpoints_dir / name / COMPLETE_MARKER).write_text("{}")
    return run


def test_checkpoints_are_complete_ones_in_step_order(tmp_path):
    run = _run_with(tmp_path)
    assert [p.name for p in run.complete_checkpoints()] == ["checkpoint-1", "checkpoint-2", "checkpoint-10"]
    assert run.latest_checkpoint().name == "checkpoint-10" and sorted(run.by_step()) == [1, 2, 10]
    assert run.set_aside_incomplete(note=lambda _: None) == ["checkpoint-11"] and not run.checkpoint_path(11).exists()
    assert [p.name[:14] for p in (run.path / "set-aside").iterdir()] == ["checkpoint-11-"]  # moved, not deleted
    run.remove_after(1)
    assert [p.name for p in run.complete_checkpoints()] == ["checkpoint-1"]
    assert RunDir(tmp_path / "empty").complete_checkpoints() == []


SPEC_CASES = [  # (spec, available, best step, steps)
    ("all", [5, 10], None, [0, 5, 10]),
    ("last", [5, 10], None, [10]),
    ("last", [], None, [0]),            # no checkpoint yet: the base model
    ("best", [5, 10], 5, [5]),
    ("auto", [5, 10], 5, [5]),          # best when recorded ...
    ("auto", [5, 10], None, [10]),      # ... else last
    ("0,10", [5, 10], None, [0, 10]),
]


@pytest.mark.parametrize("spec,available,best,steps", SPEC_CASES)
def test_checkpoint_specs(spec, available, best, steps):
    assert select_steps(spec, available, best) == steps


@pytest.mark.parametrize("spec,best,fix", [("best", None, "grpokit eval"), ("7", None, "complete checkpoints: [5, 10]"),
                                           ("x", None, "all|best|last|auto|N")])
def test_checkpoint_spec_errors_say_the_fix(spec, best, fix):
    with pytest.raises(GrpokitError) as e:
        select_steps(spec, [5, 10], best)
    assert fix in str(e.value)


# ---------------------------------------------------------------- damaged checkpoints
def _damage(ck: Path, how: str) -> None:
    weights = ck / "model.safetensors"
    if how == "missing config.json":
        (ck / "config.json").unlink()
    elif how == "truncated weights":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    elif how == "corrupt header":
        weights.write_bytes(b"\xff" * 8 + weights.read_bytes()[8:])
    elif how == "no weights":
        weights.unlink()
    elif how == "truncated optimizer":
        (ck / "optimizer.pt").write_bytes(b"PK\x03\x04 cut")
    elif how == "no trainer state":
        (ck / "trainer_state.json").unlink()


DAMAGE_CASES = [  # (damage, for_resume, words of the message; None = whole)
    ("none", False, None),
    ("missing config.json", False, "config.json is missing"),
    ("truncated weights", False, "model.safetensors is unreadable"),
    ("corrupt header", False, "model.safetensors is unreadable"),
    ("no weights", False, "no weights file"),
    ("truncated optimizer", False, None),         # eval and export do not read the optimizer ...
    ("truncated optimizer", True, "optimizer.pt is truncated"),   # ... resume does
    ("no trainer state", True, "trainer_state.json"),
]


@pytest.fixture
def fake_checkpoint(tmp_path, tiny_model_dir) -> Path:
    import torch

    ck = tmp_path / "checkpoints" / "checkpoint-3"
    shutil.copytree(tiny_model_dir, ck)
    torch.save({"state": {}}, ck / "optimizer.pt")
    (ck / "trainer_state.json").write_text(json.dumps({"global_step": 3, "max_steps": 3, "train_batch_size": 4,
                                                       "log_history": []}))
    return ck


@pytest.mark.parametrize("how,for_resume,words", DAMAGE_CASES)
def test_checkpoint_damage_is_named(fake_checkpoint, how, for_resume, words):
    _damage(fake_checkpoint, how)
    why = checkpoint_damage(fake_checkpoint, for_resume=for_resume)
    assert (why is None) if words is None else (words in why), why


def test_a_damaged_checkpoint_is_refused_by_name(fake_checkpoint):
    _damage(fake_checkpoint, "truncated weights")
    with pytest.raises(GrpokitError) as e:
        RunDir(fake_checkpoint.parents[1]).checked(fake_checkpoint)
    assert "checkpoint 3 is damaged" in str(e.value) and "fix:" in str(e.value)


def test_nonfinite_weights_are_found(tiny_model_dir):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert nonfinite_weights(model) == []
    with torch.no_grad():
        model.model.layers[0].mlp.up_proj.weight[0, 0] = float("nan")
    assert nonfinite_weights(model) == ["model.layers.0.mlp.up_proj.weight"]


# ---------------------------------------------------------------- the lock
def test_a_second_writer_is_refused_naming_the_holder(tmp_path):
    from grpokit.run.record import new_record
    from grpokit.run.claims import write_record

    write_record(tmp_path, new_record("run", {}, lock_token="t0"))  # a run's record: its lock token proves its lock
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom grpokit.run import RunDir\n"
                               "held = RunDir(sys.argv[1]).lock().acquire(); print('locked', flush=True); time.sleep(120)",
                               str(tmp_path)], stdout=subprocess.PIPE, text=True,
                              env={"PYTHONPATH": str(Path(__file__).parents[1] / "src"), "PATH": "/usr/bin:/bin"})
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(GrpokitError) as e:
            RunDir(tmp_path).lock(note=pytest.fail).acquire()
        assert f"PID {holder.pid} on host" in str(e.value) and "locked" in str(e.value)
    finally:
        holder.kill()
        holder.wait()
    # Killed, its lock is stale: the next writer takes it over and says so.
    notes = []
    lock = RunDir(tmp_path).lock(note=notes.append).acquire()
    assert len(notes) == 1 and f"stale lock of PID {holder.pid}" in notes[0]
    lock.release()
    assert not (tmp_path / ".lock").exists()  # released: removed
    with RunDir(tmp_path).lock(note=pytest.fail):  # released cleanly: no note the next time
        pass


def test_a_stale_lock_grpokit_cannot_prove_it_wrote_is_refused(tmp_path):
    (tmp_path / ".lock").write_text('{"pid": 1, "host": "h", "since": 0, "token": "someone else"}')
    with pytest.raises(GrpokitError, match="is a file without this run's lock token"):
        RunDir(tmp_path).lock(note=pytest.fail).acquire()
    assert "someone else" in (tmp_path / ".lock").read_text()


def test_the_lock_is_per_open_file_so_one_process_cannot_write_twice(tmp_path):
    with RunLock(tmp_path / ".lock", note=pytest.fail):
        with pytest.raises(GrpokitError, match="run directory is locked"):
            RunLock(tmp_path / ".lock").acquire()


def _recorded_run(folder: Path, token: str = "t0") -> Path:
    from grpokit.run.record import new_record
    from grpokit.run.claims import write_record

    write_record(folder, new_record("run", {}, lock_token=token))
    return folder


def test_a_lock_left_on_another_machine_is_never_taken_over(tmp_path):
    # issue 67: with host-local locks (NFS, local_lock) a lock another machine holds looks free here; the token
    # matching is no proof its process is gone, so it is refused naming that host, and left as it was
    _recorded_run(tmp_path)
    text = json.dumps({"pid": 4242, "host": "other-machine", "since": 0, "token": "t0"})
    (tmp_path / ".lock").write_text(text)
    with pytest.raises(GrpokitError) as e:
        RunDir(tmp_path).lock(note=pytest.fail).acquire()
    assert "PID 4242 on host other-machine" in str(e.value) and "another machine" in str(e.value)
    assert "fix: if no grpokit process is writing this run, move it away" in str(e.value)
    assert (tmp_path / ".lock").read_text() == text


@pytest.mark.parametrize("code", [errno.ENOLCK, errno.EBADF, errno.EINVAL])
@pytest.mark.parametrize("which", ["run lock", "stale run lock", "folder lock"])
def test_a_lock_error_that_is_not_a_holder_names_the_file_system(tmp_path, monkeypatch, code, which):
    # issue 67: every flock error read "another grpokit process is writing here"; NFS answers ENOLCK (no lock
    # service) or EBADF, and no local file system here does, so flock itself is made to answer so (the one stand-in)

    from grpokit.run import locks

    _recorded_run(tmp_path)
    if which == "stale run lock":  # a killed run's lock: opened, then locked without blocking
        (tmp_path / ".lock").write_text(json.dumps({"pid": 4242, "host": "h", "since": 0, "token": "t0"}))

    def flock(fd, op):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(locks.fcntl, "flock", flock)
    with pytest.raises(GrpokitError) as e:
        if which == "folder lock":
            locks.FolderLock(tmp_path, "evaluation").acquire()
        else:
            RunDir(tmp_path).lock(note=pytest.fail).acquire()
    text = str(e.value)
    assert "does not support locks" in text and errno.errorcode[code] in text and "another grpokit" not in text
    assert 'docs/reliability.md "Shared and network file systems"' in text
    assert (tmp_path / ".lock").exists() == (which == "stale run lock")  # a lock file this call made is removed


def test_a_lock_released_while_it_is_looked_at_is_taken(tmp_path, monkeypatch):
    # issue 67, the release race: a holder removes its lock file, then unlocks; a writer that opened the file just
    # before finds it locked. The file is gone by then: the writer looks again and takes a new lock, not "in use".
    import fcntl

    from grpokit.run import locks

    _recorded_run(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom grpokit.run import RunDir\n"
                               "held = RunDir(sys.argv[1]).lock().acquire(); print('locked', flush=True); "
                               "time.sleep(120)", str(tmp_path)], stdout=subprocess.PIPE, text=True,
                              env={"PYTHONPATH": str(Path(__file__).parents[1] / "src"), "PATH": "/usr/bin:/bin"})
    real = fcntl.flock
    try:
        assert holder.stdout.readline().strip() == "locked"

        def flock(fd, op):  # the holder's release, first half: its file removed while its lock is still held
            if op & fcntl.LOCK_NB and (tmp_path / ".lock").exists():
                (tmp_path / ".lock").unlink()
            return real(fd, op)

        monkeypatch.setattr(locks.fcntl, "flock", flock)
        lock = RunDir(tmp_path).lock(note=pytest.fail).acquire()
        assert json.loads((tmp_path / ".lock").read_text())["pid"] == os.getpid()
        lock.release()
    finally:
        holder.kill()
        holder.wait()


# ---------------------------------------------------------------- disk full
def _chained() -> BaseException:
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as inner:
            raise RuntimeError("basic_ios::clear: iostream error") from inner
    except RuntimeError as outer:
        return outer


@pytest.mark.parametrize("exc,full", [
    (OSError(errno.ENOSPC, "No space left on device"), True),
    (_chained(), True),                                  # the C++ writer's wrapping of it
    (OSError(errno.EACCES, "Permission denied"), False),
    (RuntimeError("probability tensor contains inf"), False),
])
def test_disk_full_is_recognised_through_the_chain(exc, full):
    assert is_disk_full(exc) == full


def test_disk_full_message_names_the_path_and_the_space(tmp_path):
    p = disk_full_problem(tmp_path, 10**12)
    assert p.message.startswith(f"no space left on device at {tmp_path}") and "GB" in p.fix and "--output-dir" in p.fix


# ---------------------------------------------------------------- doctor and report on half-written logs
def test_doctor_and_report_read_a_run_whose_logs_end_in_half_a_line(tmp_path, capsys):
    from conftest import grpokit_run

    run = grpokit_run(tmp_path / "run")
    metrics = [{"step": s, "reward": 0.1 * s, "reward_std": 0.2, "frac_reward_zero_std": 0.1, "kl": 0.01,
                "completions/mean_length": 50.0, "completions/clipped_ratio": 0.0} for s in range(1, 6)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics) + '{"step": 6, "rew')
    (run / "samples.jsonl").write_text(json.dumps({"step": 1, "prompt": "p", "completion": "c", "rewards": {}})
                                       + '\n{"step": 5, "prompt": "p", "compl')
    (run / "run.json").write_text('{"status": "runn')  # cut too
    assert main(["doctor", str(run)]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("note:") == 2, err
    assert main(["doctor", str(run), "--json"]) == 0
    out = capsys.readouterr()
    json.loads(out.out)  # stdout stays pure JSON; the notes go to stderr
    assert main(["report", str(run)]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("metrics.jsonl") == 1 and err.count("samples.jsonl") == 1, err
    assert (run / "report" / "report.html").is_file()
