#!/usr/bin/env bash
# pcc's float products against PyTorch's matmul (MKL or OpenBLAS, as the
# wheel has it) on the products of a GPT-2 training step, in one run: the
# forward (B a weight, as training reads it: not prepared), the input
# gradient (B transposed) and the weight gradient (A transposed) of each
# layer's four products and of the LM head, at T tokens.
#
#   bash bench/gemm.sh [--tokens T] [--hidden H] [--vocab V] [--threads N]
#                      [--rounds R]
#
# Each round times every shape on pcc (build/bin/pcc-bench-gemm) then on
# PyTorch, each the best of 10 runs; the table gives each system's median
# over R rounds (default 3), so that a virtual machine's slow minutes fall
# on both. PyTorch comes from $PCC_BENCH_VENV (default
# ~/.cache/pcc-bench-venv, as bench/run.sh makes it).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$HERE")"
TOOL="${PCC_BENCH_GEMM:-$ROOT/build/bin/pcc-bench-gemm}"
TOKENS=128 HIDDEN=768 VOCAB=50257 THREADS=1 ROUNDS=3
usage="usage: bash bench/gemm.sh [--tokens T] [--hidden H] [--vocab V] [--threads N] [--rounds R]"
while [ $# -gt 0 ]; do
  case "$1" in
    --tokens) TOKENS="$2"; shift 2 ;;
    --hidden) HIDDEN="$2"; shift 2 ;;
    --vocab) VOCAB="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    *) echo "$usage" >&2; exit 1 ;;
  esac
done
for v in "$TOKENS" "$HIDDEN" "$VOCAB" "$THREADS" "$ROUNDS"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || { echo "gemm.sh: not a positive count: $v" >&2; exit 1; }
done
[ -x "$TOOL" ] || { echo "gemm.sh: no $TOOL: build the tree first (ninja -C build pcc-bench-gemm)" >&2; exit 1; }
VENV="${PCC_BENCH_VENV:-$HOME/.cache/pcc-bench-venv}"
PY="$VENV/bin/python"
[ -x "$PY" ] || { echo "gemm.sh: no $PY: set PCC_BENCH_VENV, or run bench/run.sh once to make it" >&2; exit 1; }

T=$TOKENS H=$HIDDEN F=$((4 * HIDDEN)) Q=$((3 * HIDDEN)) V=$VOCAB
# name M,N,K[,ta][,tb]
SHAPES=(
  "qkv-forward $T,$Q,$H" "qkv-input-grad $T,$H,$Q,tb" "qkv-weight-grad $H,$Q,$T,ta"
  "proj-forward $T,$H,$H" "proj-input-grad $T,$H,$H,tb" "proj-weight-grad $H,$H,$T,ta"
  "fc-forward $T,$F,$H" "fc-input-grad $T,$H,$F,tb" "fc-weight-grad $H,$F,$T,ta"
  "fc2-forward $T,$H,$F" "fc2-input-grad $T,$F,$H,tb" "fc2-weight-grad $F,$H,$T,ta"
  "head-forward $T,$V,$H,tb" "head-input-grad $T,$H,$V" "head-weight-grad $V,$H,$T,ta"
)
specs=()
for s in "${SHAPES[@]}"; do specs+=("${s#* }"); done

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cat > "$WORK/torch_gemm.py" <<'PYEOF'
import sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
for spec in sys.argv[2:]:
    f = spec.split(",")
    m, n, k = map(int, f[:3])
    a = torch.full((k, m), 0.5).t() if "ta" in f else torch.full((m, k), 0.5)
    b = torch.full((n, k), 0.25).t() if "tb" in f else torch.full((k, n), 0.25)
    best = None
    for r in range(11):
        t = time.perf_counter()
        a @ b
        t = time.perf_counter() - t
        if r and (best is None or t < best):
            best = t
    print("%s %.1f" % (spec, 2.0 * m * n * k / best / 1e9))
PYEOF
# Each round opens with a warm-up product, left out of the table: the
# first shape of a round ran up to a third slower than it does alone.
warm="$T,$F,$H"
for r in $(seq "$ROUNDS"); do
  "$TOOL" --threads "$THREADS" "$warm" "${specs[@]}" | tail -n +2 |
    awk '{for (i = 2; i <= NF; ++i) if ($i == "GFLOP/s") print $1, $(i - 1)}' >> "$WORK/pcc.txt"
  OMP_NUM_THREADS="$THREADS" "$PY" "$WORK/torch_gemm.py" "$THREADS" "$warm" "${specs[@]}" |
    tail -n +2 >> "$WORK/torch.txt"
done
echo "# $("$PY" -c 'import torch; print("torch", torch.__version__)'), $THREADS thread(s), $T tokens, hidden $H, vocabulary $V; GFLOP/s, the median of $ROUNDS rounds"
printf "%-18s %-22s %8s %8s %6s\n" product "M,N,K" pcc torch "pcc/torch"
# The median of a shape's rates in FILE (lines "SPEC GFLOPS").
median() { # SPEC FILE
  awk -v s="$1" '$1 == s {print $2}' "$2" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
for s in "${SHAPES[@]}"; do
  name="${s%% *}" spec="${s#* }"
  p=$(median "$spec" "$WORK/pcc.txt")
  t=$(median "$spec" "$WORK/torch.txt")
  printf "%-18s %-22s %8.1f %8.1f %6.2f\n" "$name" "$spec" "$p" "$t" "$(awk -v p="$p" -v t="$t" 'BEGIN {print p / t}')"
done
