#!/usr/bin/env bash
# pcc's CUDA target against PyTorch on one GPU, in one run: GPT-2 124M (12
# layers, hidden 768, 12 heads, vocabulary 50304, sequence 1024), batch 16,
# bf16 products with f32 master weights (pcc --dtype bf16; PyTorch's bf16
# autocast), exported by torch's dynamo exporter on this machine.
#
#   bash bench/gpu.sh [--batch B] [--seq T] [--steps K] [--dtype bf16|f32]
#
# Prints, each the median of K steps after warm-up: ms per forward and per
# AdamW training step, tokens/s and MFU (model flops utilization: 6 N + 12
# L d T flops per trained token, a third of that per forward token, over the
# GPU's dense bf16 peak) for pcc, PyTorch eager and torch.compile; and pcc's
# compile times. Needs a GPU (nvidia-smi), the pcc build (build/bin/pcc)
# and nvcc; PyTorch with CUDA is installed from PyPI into a virtual
# environment ($PCC_BENCH_VENV, default ~/.cache/pcc-bench-gpu-venv) on the
# first run.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$HERE")"
PCC="${PCC:-$ROOT/build/bin/pcc}"
BATCH=16
SEQ=1024
STEPS=10
DTYPE=bf16
while [ $# -gt 0 ]; do
  case "$1" in
    --batch) BATCH="$2"; shift 2 ;;
    --seq) SEQ="$2"; shift 2 ;;
    --steps) STEPS="$2"; shift 2 ;;
    --dtype) DTYPE="$2"; shift 2 ;;
    *) echo "usage: bash bench/gpu.sh [--batch B] [--seq T] [--steps K] [--dtype bf16|f32]" >&2; exit 1 ;;
  esac
done
if ! nvidia-smi -L 2>/dev/null | grep -q GPU; then
  echo "bench/gpu.sh: no GPU here (nvidia-smi lists none); nothing to measure" >&2
  exit 2
fi
[ -x "$PCC" ] || { echo "bench: $PCC not built (bash utils/setup.sh test builds it)" >&2; exit 1; }

VENV="${PCC_BENCH_VENV:-$HOME/.cache/pcc-bench-gpu-venv}"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q ${PCC_BENCH_PIP_ARGS:-} torch onnx onnxscript transformers numpy
fi
PY="$VENV/bin/python"

WORK="${PCC_BENCH_WORK:-/tmp/pcc-bench-gpu}"
MODEL="$WORK/gpt2-124m-b${BATCH}x${SEQ}-v50304"
if [ ! -f "$MODEL/model.onnx" ]; then
  "$PY" "$HERE/export_gpt2.py" "$MODEL" --batch "$BATCH" --seq "$SEQ" --vocab 50304 2>&1 | grep -v Warning | tail -1
fi

GPU="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
echo "machine: $GPU, $(nproc) cores"
echo "versions: $("$PY" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)'), $("$PCC" --version | head -1)"

seconds() { local start=$1; echo "$(( $(date +%s%N) - start ))" | awk '{printf "%.1f", $1 / 1e9}'; }
median_ms() {
  grep -E '^step [0-9]+:' | sed -E 's/.* ([0-9.]+) ms$/\1/' | tail -n +3 | sort -g |
    awk '{a[NR] = $1} END {if (NR % 2) print a[(NR + 1) / 2]; else printf "%.2f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2}'
}

# Timed builds compile: the libraries' cache is off.
export PCC_CACHE_LIMIT_MB=0
start=$(date +%s%N)
rm -rf "$WORK/pcc-forward"
"$PCC" compile "$MODEL/model.onnx" -o "$WORK/pcc-forward" --target cuda --dtype "$DTYPE" >/dev/null
compile_fwd=$(seconds "$start")
start=$(date +%s%N)
rm -rf "$WORK/pcc-train"
"$PCC" compile "$MODEL/model.onnx" -o "$WORK/pcc-train" --target cuda --dtype "$DTYPE" --train >/dev/null 2>&1
compile_train=$(seconds "$start")

pcc_fwd=$("$PCC" run "$WORK/pcc-forward" --input "$MODEL/input_0.pb" --steps $((STEPS + 2)) | median_ms)
pcc_train=$("$PCC" run "$WORK/pcc-train" --input "$MODEL/input_0.pb" --steps $((STEPS + 2)) | median_ms)
peers=$(cd "$HERE" && "$PY" gpu_peers.py "$MODEL" --steps "$STEPS" 2>/dev/null | grep '^RESULT')
peer() { echo "$peers" | awk -v n="$1" '$2 == n {print $3}'; }

# Dense bf16 peak of the GPU, TFLOP/s (vendor figures, no sparsity).
case "$GPU" in
  *H100*PCIe*) PEAK=756 ;;
  *H100*|*H200*|*GH200*) PEAK=989 ;;
  *A100*) PEAK=312 ;;
  *L40S*) PEAK=362 ;;
  *) PEAK=0 ;;
esac
N=124  # million parameters (embeddings included)
flops_per_token_train=$(awk -v n="$N" -v s="$SEQ" 'BEGIN {printf "%.0f", 6 * n * 1e6 + 12 * 12 * 768 * s}')
tokens=$((BATCH * SEQ))
line() { # name, forward ms, train ms
  awk -v name="$1" -v f="$2" -v t="$3" -v tok="$tokens" -v fpt="$flops_per_token_train" -v peak="$PEAK" 'BEGIN {
    ts = (t > 0) ? tok / (t / 1e3) : 0
    mfu = (peak > 0 && t > 0) ? sprintf("%.1f%%", 100 * ts * fpt / (peak * 1e12)) : "-"
    printf "%-18s %10s %10s %12.0f %8s\n", name, f, t, ts, mfu }'
}
echo
echo "GPT-2 124M, batch ${BATCH} x ${SEQ}, ${DTYPE}, median of ${STEPS} steps"
printf "%-18s %10s %10s %12s %8s\n" "" "fwd ms" "train ms" "train tok/s" "MFU"
line pcc "$pcc_fwd" "$pcc_train"
line "PyTorch eager" "$(peer torch-eager-forward)" "$(peer torch-eager-train)"
line "torch.compile" "$(peer torch-compile-forward)" "$(peer torch-compile-train)"
echo "pcc compile time: forward ${compile_fwd} s, training ${compile_train} s"
