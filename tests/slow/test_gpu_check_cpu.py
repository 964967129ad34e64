"""benchmarks/gpu_check.py in its CPU mode: the script the one GPU run depends on works the first time.

The tiny model, 2 steps of 8 completions x 8 tokens per variant (each in its own process), plus the memory plan
against the measured peaks of a full fine-tune and a LoRA run; the figures themselves are not judged here.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.py"


def test_gpu_check_runs_every_variant_on_the_cpu(tmp_path, embedded_model_dir):
    out = tmp_path / "gpu_check.json"
    res = subprocess.run([sys.executable, str(SCRIPT), "--tokenizer-dir", str(embedded_model_dir), "--device", "cpu",
                          "--tiny", "--steps", "2", "--out", str(out)], capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    summary = json.loads(out.read_text())
    assert summary["environment"]["versions"]["trl"] and summary["settings"]["device"] == "cpu"
    tiny = summary["models"]["tiny"]
    assert set(tiny["runs"]) == {"hf", "trl-layout", "continuous", "static", "static-compile"}
    for variant, r in tiny["runs"].items():
        assert "error" not in r, (variant, r)
        assert r["generated_tokens"] and r["generated_tokens_per_s"] > 0 and 0 < r["generation_share"] <= 1
        assert variant == "hf" or r["tokens_per_s_vs_hf"] > 0
    for kind in ("full", "lora"):
        m = tiny["memory"][kind]
        assert "error" not in m and m["measured_gib"] > 0 and m["planned_over_measured"] > 0, m
