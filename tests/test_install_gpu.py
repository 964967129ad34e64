"""The GPU install keeps the user's torch: docs/install.md's command, resolved by `pip install --dry-run --report`
against the package index (the installed CPU torch stands in for a user's CUDA build: pip must not replace it)."""
from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# What docs/install.md tells a GPU machine to run; the test runs the same two lines.
KEEP_LINE = "pip list --format=freeze | grep -iE '^(torch|torchvision|torchaudio|transformers)==' > keep.txt"
INSTALL_LINE = "pip install -e '.[gpu]' -c keep.txt"
KEPT = ("torch", "torchvision", "torchaudio", "transformers")


def _index_reachable() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=3).close()
        return True
    except OSError:
        return False


def test_the_install_page_gives_the_commands_this_test_runs():
    page = (REPO / "docs" / "install.md").read_text()
    assert KEEP_LINE in page and INSTALL_LINE in page
    assert "-c keep.txt" in (REPO / "README.md").read_text()


@pytest.mark.network
@pytest.mark.skipif(not _index_reachable(), reason="no network: pip --dry-run resolves against PyPI")
def test_the_gpu_extra_with_the_installed_torch_as_constraint_keeps_it(tmp_path):
    listed = subprocess.run([sys.executable, "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True,
                            check=True).stdout
    keep = [line for line in listed.splitlines() if re.match(rf"(?i)^({'|'.join(KEPT)})==", line)]
    assert any(line.lower().startswith("torch==") for line in keep), listed
    (tmp_path / "keep.txt").write_text("\n".join(keep) + "\n")
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--report", str(report),
                           "-e", f"{REPO}[gpu]", "-c", str(tmp_path / "keep.txt")],
                          capture_output=True, text=True, timeout=900, cwd=tmp_path)
    if done.returncode and ("NewConnectionError" in done.stderr or "Could not fetch" in done.stderr):
        pytest.skip(f"the package index did not answer: {done.stderr[-300:]}")
    assert done.returncode == 0, done.stderr[-2000:]
    installs = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in json.loads(report.read_text())["install"]}
    assert "vllm" in installs, sorted(installs)
    major, minor = (int(x) for x in installs["vllm"].split(".")[:2])
    assert (0, 22) <= (major, minor) <= (0, 31), installs["vllm"]
    # What is installed here stays (torchvision/torchaudio, absent here, may come new: vLLM needs them)
    here = {line.split("==")[0].lower() for line in keep}
    assert "torch" not in installs and not set(installs) & here, {k: installs[k] for k in set(installs) & here}
