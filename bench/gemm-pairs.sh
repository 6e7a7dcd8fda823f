#!/usr/bin/env bash
# The packed GEMM before and after a change, in one process: the kernels of
# a git revision (default HEAD) against the working tree's, a call of each
# in turns on every shape, so that a virtual machine's slow minutes fall on
# both. For each shape it prints both medians (GFLOP/s) and the median and
# quartiles of the pairs' time ratios (new / base): below 1 is faster.
#
#   bash bench/gemm-pairs.sh [--base REV] [--threads N] [--pairs P] SHAPE...
#
# SHAPE is pcc-bench-gemm's M,N,K[,ta][,tb][,prepared][,cold][,acc]. Both versions are
# built as pcc builds generated code (-O3 -march=native -fopenmp), each
# in a namespace of its own (GemmPairsSide.cpp), with GemmBench.cpp.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$HERE")"
BASE=HEAD THREADS=1 PAIRS=30
usage="usage: bash bench/gemm-pairs.sh [--base REV] [--threads N] [--pairs P] M,N,K[,ta][,tb][,prepared][,cold][,acc]..."
shapes=()
while [ $# -gt 0 ]; do
  case "$1" in
    --base) BASE="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --pairs) PAIRS="$2"; shift 2 ;;
    -*) echo "$usage" >&2; exit 1 ;;
    *) shapes+=("$1"); shift ;;
  esac
done
for v in "$THREADS" "$PAIRS"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || { echo "gemm-pairs.sh: not a positive count: $v" >&2; exit 1; }
done
[ ${#shapes[@]} -gt 0 ] || { echo "$usage" >&2; exit 1; }
CXX="${PCC_CXX:-c++}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
KERNELS=lib/Target/Cpu
mkdir -p "$WORK/base"
for f in pcc_kernels.cpp pcc_kernels.h; do
  git -C "$ROOT" show "$BASE:$KERNELS/$f" > "$WORK/base/$f" 2>/dev/null ||
    { echo "gemm-pairs.sh: no $KERNELS/$f at '$BASE'" >&2; exit 1; }
done
flags=(-std=c++17 -O3 -fopenmp -fno-math-errno -march=native -w -I"$HERE")
side() { # NAME KERNELS-FOLDER FUNCTION
  "$CXX" "${flags[@]}" -c "$HERE/GemmPairsSide.cpp" -o "$WORK/$1.o" \
    -DPCC_GEMM_NAMESPACE="pcc_k_$1" -DPCC_GEMM_KERNELS="\"$2/pcc_kernels.cpp\"" \
    -DPCC_GEMM_RUN="$3"
}
side base "$WORK/base" runBase &
side new "$ROOT/$KERNELS" runNew
wait $!
"$CXX" "${flags[@]}" -DPCC_GEMM_PAIRS "$HERE/GemmBench.cpp" "$WORK/base.o" \
  "$WORK/new.o" -o "$WORK/gemm-pairs"
echo "base: $BASE ($(git -C "$ROOT" rev-parse --short "$BASE")), new: the working tree;" \
  "$THREADS thread(s), $PAIRS pairs per shape; $(lscpu | sed -n 's/^Model name: *//p')"
"$WORK/gemm-pairs" --threads "$THREADS" --reps "$PAIRS" "${shapes[@]}"
