#!/usr/bin/env bash
# Data parallelism on GPT-2 124M (torch's dynamo export, batch 4 x 64 by
# default, AdamW): for each layout, the training compile's time and peak
# memory, the per-rank optimizer state and the dp collectives of one step
# from plan.json (with what a ring algorithm sends per rank for them: an
# all-reduce 2 (d - 1) / d x the gradient bytes), and the mean step time of `pcc run` (steps 2..K)
# on this machine's MPI ranks (and rank 0's time per step in collectives
# that its computation did not hide), with the gradient buckets, without
# them (--bucket-mb 0), with every collective run only when waited for
# (PCCRT_DEFER_COLLECTIVES=1: no collective can overlap the backward), and
# with the communication thread that overlaps started collectives off and
# on (PCCRT_MPI_ASYNC=0|1; by default it is on only where a core is spare).
#
#   bash bench/dp.sh [--batch B] [--seq T] [--steps K] [--dp D]
#
# Uses bench/run.sh's virtual environment ($PCC_BENCH_VENV) and work folder
# ($PCC_BENCH_WORK).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$HERE")"
PCC="${PCC:-$ROOT/build/bin/pcc}"
BATCH=4
SEQ=64
STEPS=4
DP=2
while [ $# -gt 0 ]; do
  case "$1" in
    --batch) BATCH="$2"; shift 2 ;;
    --seq) SEQ="$2"; shift 2 ;;
    --steps) STEPS="$2"; shift 2 ;;
    --dp) DP="$2"; shift 2 ;;
    *) echo "usage: bash bench/dp.sh [--batch B] [--seq T] [--steps K] [--dp D]" >&2; exit 1 ;;
  esac
done
[ -x "$PCC" ] || { echo "bench: $PCC not built (bash utils/setup.sh test builds it)" >&2; exit 1; }
PY="${PCC_BENCH_VENV:-$HOME/.cache/pcc-bench-venv}/bin/python"
[ -x "$PY" ] || { echo "bench: run bench/run.sh once to make $PY" >&2; exit 1; }
WORK="${PCC_BENCH_WORK:-/tmp/pcc-bench}"
MODEL="$WORK/gpt2-small-b${BATCH}s${SEQ}"
if [ ! -f "$MODEL/model.onnx" ]; then
  "$PY" "$HERE/export_gpt2.py" "$MODEL" --batch "$BATCH" --seq "$SEQ" 2>&1 | grep -v Warning | tail -1
fi

compile() { # NAME FLAGS...: prints "seconds peak-MB"; the libraries' cache
  # is off, so that each build compiles
  local name="$1"; shift
  rm -rf "$WORK/dp-$name"
  PCC_CACHE_LIMIT_MB=0 /usr/bin/time -f "%e %M" -o "$WORK/dp.time" "$PCC" compile "$MODEL/model.onnx" \
    -o "$WORK/dp-$name" --train "$@" > "$WORK/dp-$name.log" 2>&1 ||
    { cat "$WORK/dp-$name.log" >&2; exit 1; }
  read -r secs kb < "$WORK/dp.time"
  printf "%.1f s, %.2f GB" "$secs" "$(echo "$kb / 1000000" | bc -l)"
}

step_ms() { # NAME [ENV=VALUE]: mean step time after the first, in ms, and
  # rank 0's time in collectives that its computation did not hide
  local name="$1"; shift
  env "$@" "$PCC" run "$WORK/dp-$name" --input "$MODEL/input_0.pb" --steps "$STEPS" \
    --log-every 1 > "$WORK/dp-$name.run" 2>&1 || { cat "$WORK/dp-$name.run" >&2; exit 1; }
  python3 - "$WORK/dp-$name.run" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
steps = re.findall(r"step \d+: loss ([0-9.]+), [0-9]+ tokens/s, ([0-9.]+) ms/step(?:, ([0-9.]+) ms/step in collectives)?", text)
later = steps[1:] or steps
mean = lambda xs: sum(xs) / len(xs)
comm = "" if not later[0][2] else ", %.0f ms in collectives" % mean([float(s[2]) for s in later])
print("%.0f ms%s (loss %s)" % (mean([float(s[1]) for s in later]), comm, steps[0][0]))
EOF
}

plan() { # NAME: optimizer state per rank, the dp collectives, and what a
  # ring algorithm sends per rank for them: 2 (d-1)/d x B for an all-reduce
  # of B bytes, (d-1)/d x the whole for a reduce-scatter or an all-gather
  # (plan.json gives each collective's result bytes).
  python3 - "$WORK/dp-$1/plan.json" "$DP" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1])); d = int(sys.argv[2])
r0 = p["ranks"][0]
state = r0["optimizer_state_bytes"]
dp = [c for c in p["collectives"] if c["axes"] == "dp"]
sent = 0.0
for c in dp:
    whole = c["bytes"] * (d if c["kind"] == "reduce_scatter" else 1)
    sent += (2 if c["kind"] == "all_reduce" else 1) * (d - 1) / d * whole
desc = ", ".join("%d %s" % (c["count"], c["kind"]) for c in dp) or "none"
print("parameters %.0f MB, gradients %.0f MB, state %.0f MB; dp: %s; a ring sends %.0f MB per rank" %
      (r0["parameter_bytes"] / 1e6, r0["gradient_bytes"] / 1e6, state / 1e6, desc, sent / 1e6))
EOF
}

echo "GPT-2 124M, batch $BATCH x $SEQ, AdamW, dp $DP, $(nproc) cores"
echo "| layout | compile | plan | step |"
echo "|---|---|---|---|"
row() { # NAME LABEL FLAGS...
  local name="$1" label="$2"; shift 2
  local c; c="$(compile "$name" "$@")"
  printf "| %s | %s | %s | %s |\n" "$label" "$c" "$(plan "$name")" "$(step_ms "$name")"
}
row tp1 "dp 1" --bucket-mb 25
row dp "dp $DP" --dp "$DP"
row dp0 "dp $DP, --bucket-mb 0" --dp "$DP" --bucket-mb 0
printf "| %s | (as dp %s) | | %s |\n" "dp $DP, collectives deferred to their wait" "$DP" \
  "$(step_ms dp PCCRT_DEFER_COLLECTIVES=1)"
for async in 0 1; do
  printf "| %s | (as dp %s) | | %s |\n" "dp $DP, PCCRT_MPI_ASYNC=$async" "$DP" \
    "$(step_ms dp PCCRT_MPI_ASYNC=$async)"
done
row z1 "dp $DP, --zero 1" --dp "$DP" --zero 1
row z2 "dp $DP, --zero 2" --dp "$DP" --zero 2
row z3 "dp $DP, --zero 3" --dp "$DP" --zero 3
row dptp "dp $DP x tp 2" --dp "$DP" --tp 2
row dptpz1 "dp $DP x tp 2, --zero 1" --dp "$DP" --tp 2 --zero 1
row dptpz3 "dp $DP x tp 2, --zero 3" --dp "$DP" --tp 2 --zero 3
