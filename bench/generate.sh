#!/usr/bin/env bash
# Greedy text generation on the CPU: pcc against transformers, onnxruntime
# (on Optimum's with-past export) and CTranslate2, side by side in one run.
# GPT-2 124M's architecture with random weights, prompts of 32 tokens, 64 new
# tokens, batch 1 and batch 8; prints seconds, tokens/s, each system's ratio
# to the fastest peer and to the memory-bandwidth floor, and checks every
# system's tokens against transformers'. bench/generate.py says how.
#
#   bash bench/generate.sh [--json FILE] [--layers N] [--threads N]
#                          [--runs R] [--new-tokens T] [--batches 1,8] ...
#
# Every option goes to generate.py (python bench/generate.py --help). This
# wrapper installs the peers first, each only if missing:
#   $PCC_BENCH_VENV (default /work/venv): torch, transformers, onnx,
#       onnxscript, onnxruntime, ctranslate2
#   $PCC_BENCH_OPTIMUM_VENV (default /work/venv-optimum): optimum-onnx (with
#       the transformers 4.x it requires) and accelerate, for the with-past
#       export only. Optimum does not install beside transformers 5.x, so it
#       has a venv of its own; that venv sees the main venv's packages (torch,
#       onnx, numpy) through a .pth file, after its own, instead of
#       downloading PyTorch a second time.
# The pcc binary is $PCC (default build/bin/pcc); the work files (the saved
# model, the exports, pcc's builds) go to --work (default
# /tmp/pcc-bench-generate).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$HERE")"
PCC="${PCC:-$ROOT/build/bin/pcc}"
[ -x "$PCC" ] || { echo "bench: $PCC not built" >&2; exit 1; }

VENV="${PCC_BENCH_VENV:-/work/venv}"
OPT_VENV="${PCC_BENCH_OPTIMUM_VENV:-/work/venv-optimum}"

if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q ${PCC_BENCH_PIP_ARGS:-} torch transformers onnx \
    onnxscript onnxruntime numpy
fi
"$VENV/bin/python" -c "import ctranslate2" 2>/dev/null ||
  "$VENV/bin/pip" install -q ctranslate2

if [ ! -x "$OPT_VENV/bin/optimum-cli" ]; then
  # The same Python as the main venv (the .pth below needs its version).
  "$VENV/bin/python" -m venv "$OPT_VENV"
  main_site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  opt_site="$("$OPT_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$main_site" > "$opt_site/zz-pcc-bench-main-venv.pth"
  "$OPT_VENV/bin/pip" install -q optimum-onnx accelerate
fi

exec "$VENV/bin/python" "$HERE/generate.py" --pcc "$PCC" --optimum-venv "$OPT_VENV" "$@"
