#!/usr/bin/env bash
# The runtime's collectives over MPI ranks on this host, every one through
# the shared-memory segment (PCCRT_SHM=2; by default a group whose ranks
# share a host takes it only from the sizes where it pays) and every one
# through Open MPI (PCCRT_SHM=0), in turns:
#
#   bash bench/comm.sh [--ranks N] [--rounds R] [BYTES...]
#
# BYTES: a rank's float data per collective (default 16 KiB, 384 KiB,
# 1.5 MiB, 25 MiB and 100 MiB: a tensor-parallel all-reduce at 128 and 512
# tokens of hidden 768, a gradient bucket, a large one). Each round runs
# build/bin/pcc-bench-comm (the median of 20 runs of each collective) once
# each way; the table gives each way's median over R rounds (default 3), in
# milliseconds.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
TOOL="${PCC_BENCH_COMM:-$(dirname "$HERE")/build/bin/pcc-bench-comm}"
RANKS=2 ROUNDS=3 SIZES=()
usage="usage: bash bench/comm.sh [--ranks N] [--rounds R] [BYTES...]"
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) RANKS="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    -*) echo "$usage" >&2; exit 1 ;;
    *) SIZES+=("$1"); shift ;;
  esac
done
[ ${#SIZES[@]} -gt 0 ] || SIZES=(16384 393216 1572864 26214400 104857600)
for v in "$RANKS" "$ROUNDS" "${SIZES[@]}"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || { echo "comm.sh: not a positive count: $v" >&2; exit 1; }
done
[ -x "$TOOL" ] || { echo "comm.sh: no $TOOL: build the tree with MPI first (ninja -C build pcc-bench-comm)" >&2; exit 1; }
MPIRUN=(mpirun -n "$RANKS" --oversubscribe --bind-to none)
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
for r in $(seq "$ROUNDS"); do
  for way in shm mpi; do
    shm=2; [ "$way" = mpi ] && shm=0
    "${MPIRUN[@]}" -x PCCRT_SHM=$shm "$TOOL" "${SIZES[@]}" >> "$WORK/$way.txt"
  done
done
# The median of column COL over the lines of BYTES in FILE.
median() { # BYTES COL FILE
  awk -v b="$1" -v c="$2" '$1 == b {print $c}' "$3" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
echo "# $RANKS ranks on $(nproc) cores, ms, the median of $ROUNDS rounds (each the median of 20 runs)"
printf "%-10s %26s %26s %26s\n" bytes "all_reduce shm / MPI" "all_gather shm / MPI" "reduce_scatter shm / MPI"
for b in "${SIZES[@]}"; do
  line=$(printf "%-10s" "$b")
  for col in 3 5 7; do
    line+=$(printf " %12s / %-11s" "$(median "$b" "$col" "$WORK/shm.txt")" "$(median "$b" "$col" "$WORK/mpi.txt")")
  done
  echo "$line"
done
