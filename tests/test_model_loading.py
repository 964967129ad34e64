"""Every command loads a recipe's model one way (grpokit.models.load_recipe_model): the recipe's dtype and
init_kwargs reach every from_pretrained, for the base model, a checkpoint and a LoRA adapter alike.

Each command runs for real, through the CLI, on a tiny model; the test records the keyword arguments of every
`AutoModelForCausalLM.from_pretrained` and `PeftModel.from_pretrained` call it makes (the real ones are called).
`attn_implementation: eager` stands for any init_kwargs entry: harmless on a CPU, and visible in the call.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from conftest import addition_recipe, write_jsonl
from grpokit import models
from grpokit.cli import main

INIT = {"attn_implementation": "eager"}


@pytest.fixture
def loads(monkeypatch):
    """[(what, path, kwargs)] of every model load in the test, each passed on to the real from_pretrained."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    calls = []
    real_auto, real_peft = AutoModelForCausalLM.from_pretrained.__func__, PeftModel.from_pretrained.__func__

    def auto(cls, path, *args, **kwargs):
        calls.append(("model", str(path), kwargs))
        return real_auto(cls, path, *args, **kwargs)

    def peft(cls, model, path, *args, **kwargs):
        calls.append(("adapter", str(path), {"base": model}))
        return real_peft(cls, model, path, *args, **kwargs)

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", classmethod(auto))
    monkeypatch.setattr(PeftModel, "from_pretrained", classmethod(peft))
    return calls


def _recipe(tmp_path: Path, model_dir: Path, lora: bool = False) -> Path:
    path = addition_recipe(tmp_path, model_dir, rows=8, train={
        "max_steps": 1, "num_generations": 2, "per_device_train_batch_size": 2, "max_completion_length": 8,
        "save_steps": 1, "logging_steps": 1})
    raw = yaml.safe_load(path.read_text())
    raw["model"].update(dtype="float32", init_kwargs=INIT, **({"lora": {"r": 4, "alpha": 8}} if lora else {}))
    raw["output_dir"] = str(tmp_path / "run")
    path.write_text(yaml.safe_dump(raw))
    return path


def _model_loads(calls) -> list[dict]:
    return [kw for what, _, kw in calls if what == "model"]


def _assert_recipe_kwargs(calls, dtype=torch.float32):
    loaded = _model_loads(calls)
    assert loaded, "the command loaded no model"
    for kw in loaded:
        assert kw.get("attn_implementation") == "eager" and kw.get("dtype") == dtype, kw


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_model_dir):
    """A full fine-tuned run and a LoRA run of one step each (the commands below read them)."""
    out = {}
    for kind in ("full", "lora"):
        folder = tmp_path_factory.mktemp(kind)
        recipe = _recipe(folder, tiny_model_dir, lora=kind == "lora")
        assert main(["train", str(recipe)]) == 0
        out[kind] = (recipe, folder / "run")
    return out


def test_train_passes_the_recipe_kwargs(tmp_path, tiny_model_dir, loads):
    recipe = _recipe(tmp_path, tiny_model_dir)
    assert main(["train", str(recipe)]) == 0
    _assert_recipe_kwargs(loads)


def test_sft_passes_the_recipe_kwargs(tmp_path, tiny_model_dir, loads):
    recipe = _recipe(tmp_path, tiny_model_dir)
    assert main(["sft", str(recipe)]) == 0
    _assert_recipe_kwargs(loads)


def test_preflight_passes_the_recipe_kwargs(tmp_path, tiny_model_dir, loads):
    recipe = _recipe(tmp_path, tiny_model_dir)
    main(["preflight", str(recipe), "--prompts", "2", "--generations", "2", "--output", str(tmp_path / "p.json")])
    _assert_recipe_kwargs(loads)


def test_eval_loads_base_and_checkpoint_alike(trained, loads):
    _, run = trained["full"]
    assert main(["eval", str(run), "--checkpoints", "all"]) == 0
    paths = [p for what, p, _ in loads if what == "model"]
    assert len(paths) == 2 and any(p.endswith("checkpoint-1") for p in paths), paths  # step 0 and step 1
    _assert_recipe_kwargs(loads)


def test_eval_puts_a_lora_adapter_on_the_recipes_base(trained, loads):
    _, run = trained["lora"]
    assert main(["eval", str(run), "--checkpoints", "all"]) == 0
    assert len(_model_loads(loads)) == 1  # the base, once: step 0 and under the adapter
    (adapter,) = [p for what, p, _ in loads if what == "adapter"]
    assert adapter.endswith("checkpoint-1")
    _assert_recipe_kwargs(loads)


def test_rm_candidates_pass_the_recipe_kwargs(tmp_path, tiny_model_dir, loads):
    recipe = _recipe(tmp_path, tiny_model_dir)
    prompts = write_jsonl(tmp_path / "p.jsonl", [{"question": "1 + 1 = ?"}])
    assert main(["rm", "candidates", str(recipe), "--prompts", str(prompts), "--n", "2",
                 "--out", str(tmp_path / "ranks.jsonl")]) == 0
    _assert_recipe_kwargs(loads)


def test_export_merges_in_float32_with_the_other_kwargs(trained, tmp_path, loads):
    _, run = trained["lora"]
    assert main(["export", str(run), "--checkpoint", "last", "--out", str(tmp_path / "exp")]) == 0
    # the base under the adapter, then the exported folder as a user loads it: both float32, eager kept
    _assert_recipe_kwargs(loads, dtype=torch.float32)
    assert json.loads((tmp_path / "exp" / "hf" / "config.json").read_text())["architectures"]


def test_a_merge_drops_the_quantization_config(tiny_model_dir, loads):
    # QLoRA: the adapter is merged into full-precision base weights, which load without bitsandbytes.
    from grpokit.recipe.schema import ModelConfig

    section = ModelConfig(name=str(tiny_model_dir), dtype="bfloat16",
                          init_kwargs={**INIT, "quantization_config": {"load_in_4bit": True}})
    model = models.load_recipe_model(section, tiny_model_dir, for_merge=True)
    (kw,) = _model_loads(loads)
    assert "quantization_config" not in kw and kw["attn_implementation"] == "eager" and kw["dtype"] == torch.float32
    assert next(model.parameters()).dtype == torch.float32


def test_no_command_loads_a_model_another_way():
    # The one loader is grpokit.models: no other module of the package calls from_pretrained on a causal LM.
    src = Path(__file__).parents[1] / "src" / "grpokit"
    others = [str(p.relative_to(src)) for p in src.rglob("*.py") if p.name != "models.py"
              and ("AutoModelForCausalLM.from_pretrained" in p.read_text() or "load_model(" in p.read_text())]
    # export reads a GGUF file (llama.cpp's output, not a recipe's model) to compare it with the HF export
    assert others == ["export/gguf.py"], others
    text = (src / "export" / "gguf.py").read_text()
    assert text.count("AutoModelForCausalLM.from_pretrained") == 1 and "load_model(" not in text
