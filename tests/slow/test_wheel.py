"""Slow tier: the package is the product. A wheel built from this checkout, installed into a fresh virtual
environment, runs `grpokit demo` from a folder with nothing of the checkout in it (its recipes and built-in data are
package data), on the real embedded model, shortened to one step.

The fresh environment gets grpokit from the wheel only; its dependencies (torch, TRL, ...) are the test
environment's, reached through a path file, so the test installs nothing from the network. The checkout's own
editable install is not visible there (a path file's directories are added as they are; the editable install's
own path file in them is not read)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def _build_wheel(tmp_path: Path) -> Path:
    src = tmp_path / "checkout"  # a copy: the build writes build/ and egg-info where it runs
    shutil.copytree(REPO / "src", src / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    out = tmp_path / "dist"
    import importlib.util

    # the test environment's setuptools where it has one (nothing downloaded); else pip's isolated build fetches it
    isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-build-isolation"]
    run = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation, "-q", "-w",
                          str(out), str(src)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    (wheel,) = out.glob("grpokit-*.whl")
    return wheel


def _fresh_env(tmp_path: Path, wheel: Path) -> Path:
    """A new virtual environment with the wheel installed by its own pip (pip's --prefix from this environment would
    uninstall this environment's grpokit first), the test environment's packages reachable for the rest."""
    env = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True, timeout=300)
    py = env / "bin" / "python"
    run = subprocess.run([str(py), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "_deps_of_the_test_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return py


def test_a_wheel_runs_the_demo_from_any_folder(tmp_path):
    wheel = _build_wheel(tmp_path)
    py = _fresh_env(tmp_path, wheel)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = subprocess.run([str(py), "-c", "import grpokit, grpokit.demo.common as c; print(grpokit.__file__); "
                            "print(c.RECIPES); print(sorted(p.name for p in c.RECIPES.glob('*.yaml'))[:2])"],
                           cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300)
    assert where.returncode == 0, where.stderr[-2000:]
    module, recipes, _ = where.stdout.splitlines()
    assert str(tmp_path / "venv") in module and str(REPO) not in module  # the wheel's grpokit, not the checkout's
    assert recipes.startswith(str(tmp_path / "venv"))
    run = subprocess.run([str(py), "-m", "grpokit", "demo", "--task", "arithmetic-grpo", "--output-dir", "demo",
                          "--set", "train.max_steps=1", "--set", "train.save_steps=1", "--set", "data.eval_max_rows=4",
                          "--set", "train.max_completion_length=16"],
                         cwd=elsewhere, env=env, capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, (run.stdout[-3000:], run.stderr[-3000:])
    assert "Traceback" not in run.stderr
    record = json.loads((elsewhere / "demo" / "run.json").read_text())
    assert record["status"] == "completed" and record["step"] == 1
