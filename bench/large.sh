#!/usr/bin/env bash
# Time and peak memory of pcc on a model of several gigabytes: GPT-2 large
# (774M parameters, 3.1 GB of weights in one external data file, torch's
# dynamo exporter) or another size of export_gpt2.py, batch 1 x 128.
#
#   bash bench/large.sh [--size large|xl|medium] [--run all|forward|none]
#
# Prints one markdown row per step: `pcc import`, the forward compile, the
# training compile (AdamW), and `pcc run` of each (2 training steps), with
# wall time and peak resident memory (GNU time's maximum RSS), and the
# planned bytes per rank from report.json. --run forward skips the
# training run (a model whose training state does not fit this machine's
# memory), --run none both runs. The forward run's logits are compared
# with PyTorch's. Uses bench/run.sh's
# virtual environment ($PCC_BENCH_VENV) and work folder ($PCC_BENCH_WORK).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$HERE")"
PCC="${PCC:-$ROOT/build/bin/pcc}"
SIZE=large
RUN=all
while [ $# -gt 0 ]; do
  case "$1" in
    --size) SIZE="$2"; shift 2 ;;
    --run) RUN="$2"; shift 2 ;;
    *) echo "usage: bash bench/large.sh [--size large|xl|medium] [--run all|forward|none]" >&2; exit 1 ;;
  esac
done
[ -x "$PCC" ] || { echo "bench: $PCC not built (bash utils/setup.sh test builds it)" >&2; exit 1; }
PY="${PCC_BENCH_VENV:-$HOME/.cache/pcc-bench-venv}/bin/python"
[ -x "$PY" ] || { echo "bench: run bench/run.sh once to make $PY" >&2; exit 1; }
WORK="${PCC_BENCH_WORK:-/tmp/pcc-bench}"
MODEL="$WORK/gpt2-$SIZE"
if [ ! -f "$MODEL/model.onnx" ]; then
  "$PY" "$HERE/export_gpt2.py" "$MODEL" --size "$SIZE" 2>&1 | grep -v Warning | tail -1
fi
echo "model: $MODEL/model.onnx ($(du -h "$MODEL/model.onnx.data" | cut -f1) of external data)"

measure() { # LABEL PLANNED_JSON COMMAND...
  local label="$1" planned="$2"; shift 2
  local log="$WORK/large.$$.time"
  /usr/bin/time -f "%e %M" -o "$log" "$@" > "$WORK/large.$$.out" 2>&1 ||
    { cat "$WORK/large.$$.out" >&2; exit 1; }
  read -r secs kb < "$log"
  local plan="-"
  if [ -n "$planned" ]; then
    plan="$(python3 -c "import json,sys; print(f\"{json.load(open(sys.argv[1]))['memory']['per_rank_bytes'][0]/1e9:.2f} GB\")" "$planned")"
  fi
  printf "| %s | %.1f s | %.2f GB | %s |\n" "$label" "$secs" "$(echo "$kb / 1000000" | bc -l)" "$plan"
}

echo "| step | time | peak memory | planned per rank |"
echo "|---|---|---|---|"
measure "pcc import" "" "$PCC" import "$MODEL/model.onnx"
rm -rf "$WORK/large-fwd" "$WORK/large-train"
measure "forward compile" "" "$PCC" compile "$MODEL/model.onnx" -o "$WORK/large-fwd"
measure "training compile" "" "$PCC" compile "$MODEL/model.onnx" --train -o "$WORK/large-train"
if [ "$RUN" != none ]; then
  rm -rf "$WORK/large-dump"
  measure "pcc run forward" "$WORK/large-fwd/report.json" "$PCC" run "$WORK/large-fwd" --input "$MODEL/input_0.pb" --dump "$WORK/large-dump"
  if [ "$RUN" = all ]; then
    measure "pcc run training (2 steps)" "$WORK/large-train/report.json" "$PCC" run "$WORK/large-train" --input "$MODEL/input_0.pb" --steps 2
  fi
  "$PY" "$HERE/compare_gpt2.py" "$MODEL" --size "$SIZE" "$WORK/large-dump/outputs.safetensors"
fi
rm -f "$WORK/large.$$.time" "$WORK/large.$$.out"
