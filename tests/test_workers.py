"""The suite in parallel workers (`pytest -n auto`, tests/conftest.py, docs/tests.md): each worker's torch on its
share of the cores, and the test collected first by name still there."""
from __future__ import annotations

import os

import pytest
from conftest import LONGEST, MAX_WORKERS, REPO, _cores


def test_the_test_collected_first_is_still_there():
    path, _, name = LONGEST.partition("::")
    assert f"\ndef {name}(" in (REPO / path).read_text(encoding="utf-8"), f"{LONGEST} was renamed: say so in conftest"


@pytest.mark.parametrize("cores, workers", [(1, 1), (2, 2), (64, MAX_WORKERS)])
def test_auto_asks_for_a_worker_per_core_up_to_the_cap(pytestconfig, monkeypatch, cores, workers):
    import conftest

    # a 64-core machine gets the cap, where xdist's own answer would be 64 (its checkpoints x 64 on one disk)
    monkeypatch.setattr(conftest, "_cores", lambda: cores)
    assert pytestconfig.hook.pytest_xdist_auto_num_workers(config=pytestconfig) == workers


@pytest.mark.skipif("PYTEST_XDIST_WORKER_COUNT" not in os.environ, reason="runs one process (no -n): no share to check")
def test_workers_share_the_cores_instead_of_each_taking_them_all():
    import subprocess
    import sys

    import torch

    workers = int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    assert torch.get_num_threads() * workers <= max(_cores(), workers)
    # ... and a process the test starts (a CLI test's grpokit) inherits the share
    child = subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"], capture_output=True,
                           text=True, check=True, timeout=120)
    assert int(child.stdout) == torch.get_num_threads()
