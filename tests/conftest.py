"""Shared fixtures: the embedded tokenizer and tiny real models built from a config.

Tiny models (2 layers, hidden 64) use the embedded SmolLM2 tokenizer, so they
exercise the same tokenisation, templates and TRL code paths as the real
model in a second or two per training step.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

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


def _save_tiny(path: Path, tokenizer, kind: str = "llama", chat_template: str | None = None) -> Path:
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen3Config

    torch.manual_seed(0)
    common = dict(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
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
def tiny_qwen3_dir(tmp_path_factory, tokenizer) -> Path:
    return _save_tiny(tmp_path_factory.mktemp("tiny-qwen3"), tokenizer, "qwen3", QWEN3_STYLE_TEMPLATE)


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows),
                    encoding="utf-8")
    return path
