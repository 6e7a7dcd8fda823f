#!/usr/bin/env bash
# pcc against its peers on the CPU, in one run on one machine: GPT-2 124M
# (12 layers, hidden 768, 12 heads, vocabulary 50257, random weights,
# exported by torch's dynamo exporter), batch B x T (default 1 x 128).
#
#   bash bench/run.sh [--threads N] [--batch B] [--seq T] [--steps K]
#                     [--rounds R]
#
# Times, each the median of K runs after warm-up, with N threads for every
# system (default: all cores). pcc's forward and onnxruntime's take turns
# instead: R rounds (default 6) of K steps each, the median over all of a
# system's steps, so that a virtual machine's slow minutes fall on both; so
# do pcc's training step and PyTorch eager's, over R / 2 rounds (rounded up):
#   forward      pcc (pcc run --steps), onnxruntime (CPU provider, N intra-op
#                threads), PyTorch eager and torch.compile (inference mode)
#   train step   pcc --train (loss, backward, AdamW), PyTorch eager and
#                torch.compile (zero_grad, forward, cross-entropy, backward,
#                AdamW step; lr 1e-3, weight decay 0.01 as pcc's defaults)
# and prints ms and ratios, with the compile times of pcc, and the forward's
# arithmetic rate against the machine's fused multiply-add peak
# (pcc-bench-gemm --peak, N threads; the forward's FLOPs from pcc's
# report.json): what fraction of the peak each forward runs at. Needs the pcc
# build (build/bin/pcc); PyTorch, onnxruntime and transformers are installed
# from PyPI into a virtual environment ($PCC_BENCH_VENV, default
# ~/.cache/pcc-bench-venv) on the first run. The model is exported into
# $PCC_BENCH_WORK (default /tmp/pcc-bench) once per batch shape.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$HERE")"
PCC="${PCC:-$ROOT/build/bin/pcc}"
THREADS="$(nproc)"
BATCH=1
SEQ=128
STEPS=10
ROUNDS=6
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) THREADS="$2"; shift 2 ;;
    --batch) BATCH="$2"; shift 2 ;;
    --seq) SEQ="$2"; shift 2 ;;
    --steps) STEPS="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    *) echo "usage: bash bench/run.sh [--threads N] [--batch B] [--seq T] [--steps K] [--rounds R]" >&2; exit 1 ;;
  esac
done
[ -x "$PCC" ] || { echo "bench: $PCC not built (bash utils/setup.sh test builds it)" >&2; exit 1; }

VENV="${PCC_BENCH_VENV:-$HOME/.cache/pcc-bench-venv}"
if [ ! -x "$VENV/bin/python" ]; then
  # PyPI's torch (PCC_BENCH_PIP_ARGS adds pip options, e.g. another index).
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q ${PCC_BENCH_PIP_ARGS:-} torch onnx onnxscript \
    onnxruntime transformers numpy
fi
PY="$VENV/bin/python"

WORK="${PCC_BENCH_WORK:-/tmp/pcc-bench}"
MODEL="$WORK/gpt2-124m-b${BATCH}x${SEQ}"
if [ ! -f "$MODEL/model.onnx" ]; then
  "$PY" "$HERE/export_gpt2.py" "$MODEL" --batch "$BATCH" --seq "$SEQ" 2>&1 | grep -v Warning | tail -1
fi

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, threads $THREADS"
echo "versions: $("$PY" -c 'import torch, onnxruntime; print("torch", torch.__version__, "onnxruntime", onnxruntime.__version__)'), $("$PCC" --version | head -1)"

seconds() { local start=$1; echo "$(( $(date +%s%N) - start ))" | awk '{printf "%.1f", $1 / 1e9}'; }

# The compile times start once the last build's output is gone: deleting
# its weights (half a gigabyte for GPT-2 124M) is not compiling. pcc's
# kernels' cache starts empty: the first forward compiles the kernels
# beside the model, the training step's build precompiles their header,
# and the second forward finds both, as every later build does. The
# libraries' cache is off (PCC_CACHE_LIMIT_MB=0): each build compiles.
export PCC_CACHE_DIR="$WORK/pcc-cache" PCC_CACHE_LIMIT_MB=0
rm -rf "$WORK/pcc-forward" "$WORK/pcc-train" "$PCC_CACHE_DIR"
compile_forward() {
  rm -rf "$WORK/pcc-forward"
  local start=$(date +%s%N)
  "$PCC" compile "$MODEL/model.onnx" -o "$WORK/pcc-forward" --threads "$THREADS" >/dev/null
  seconds "$start"
}
compile_fwd_cold=$(compile_forward)
start=$(date +%s%N)
"$PCC" compile "$MODEL/model.onnx" -o "$WORK/pcc-train" --train --threads "$THREADS" >/dev/null 2>&1
compile_train=$(seconds "$start")
compile_fwd=$(compile_forward)

peers=$(cd "$HERE" && "$PY" peers.py "$MODEL" --threads "$THREADS" --steps "$STEPS" \
          --rounds "$ROUNDS" --pcc "$PCC" --pcc-forward "$WORK/pcc-forward" \
          --pcc-train "$WORK/pcc-train" 2>/dev/null | grep '^RESULT')
peer() { echo "$peers" | awk -v n="$1" '$2 == n {print $3}'; }
pcc_fwd=$(peer pcc-forward)
pcc_train=$(peer pcc-train)

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "-"}'; }
echo
echo "GPT-2 124M, batch ${BATCH} x ${SEQ}, ${THREADS} threads, median of ${STEPS} runs (ms);"
echo "pcc's and onnxruntime's forward: of ${ROUNDS} rounds of ${STEPS}, in turns;"
echo "pcc's and PyTorch eager's train step: of $(( (ROUNDS + 1) / 2 )) rounds of ${STEPS}, in turns"
printf "%-26s %10s %10s\n" "" "forward" "train step"
printf "%-26s %10s %10s\n" "pcc" "$pcc_fwd" "$pcc_train"
printf "%-26s %10s %10s\n" "onnxruntime" "$(peer ort-forward)" "-"
printf "%-26s %10s %10s\n" "PyTorch eager" "$(peer torch-eager-forward)" "$(peer torch-eager-train)"
printf "%-26s %10s %10s\n" "torch.compile" "$(peer torch-compile-forward)" "$(peer torch-compile-train)"
echo
echo "pcc / onnxruntime (forward):     $(ratio "$pcc_fwd" "$(peer ort-forward)")"
echo "pcc / PyTorch eager (forward):   $(ratio "$pcc_fwd" "$(peer torch-eager-forward)")"
echo "pcc / PyTorch eager (train):     $(ratio "$pcc_train" "$(peer torch-eager-train)")"
echo "pcc / torch.compile (forward):   $(ratio "$pcc_fwd" "$(peer torch-compile-forward)")"
echo "pcc / torch.compile (train):     $(ratio "$pcc_train" "$(peer torch-compile-train)")"
peak_tool="$(dirname "$PCC")/pcc-bench-gemm"
flops=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["flops"])' "$WORK/pcc-forward/report.json")
if [ -x "$peak_tool" ]; then
  peak=$("$peak_tool" --peak --threads "$THREADS" --reps 10 | awk '{print $(NF-1)}')
  rate() { awk -v f="$flops" -v ms="$1" -v p="$peak" 'BEGIN {if (ms > 0) printf "%.1f GFLOP/s, %.0f%% of the peak", f / ms / 1e6, 100 * f / ms / 1e6 / p; else print "-"}'; }
  echo "fused multiply-add peak, ${THREADS} threads: ${peak} GFLOP/s; the forward: $(awk -v f="$flops" 'BEGIN {printf "%.2f", f / 1e9}') GFLOP"
  echo "  pcc $(rate "$pcc_fwd"); onnxruntime $(rate "$(peer ort-forward)")"
fi
echo "pcc compile time: forward ${compile_fwd} s (${compile_fwd_cold} s with an empty kernels' cache), training ${compile_train} s"
