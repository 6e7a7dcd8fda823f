#!/usr/bin/env bash
# pcc's distributed training against PyTorch's on the CPU (issue 52), in one
# run on one machine: GPT-2 124M (torch's dynamo export by
# bench/export_gpt2.py, random weights, vocabulary 50257), the same global
# batch B x T (default 4 x 128) and the same input, AdamW (lr 1e-3, weight
# decay 0.01) on the causal-LM loss, R ranks (default 2) of N threads each
# (default 1), four layouts:
#   dp R                   pcc --dp R           PyTorch DDP
#   dp R, ZeRO 3           pcc --dp R --zero 3  PyTorch FSDP2 (fully_shard on
#                                               each block, then the model)
#   pp R, M microbatches,  pcc --pp R           torch.distributed.pipelining
#   1F1B                   --microbatches M     (R stages of GPT-2's blocks,
#                          --schedule 1f1b      Schedule1F1B)
#   pp R, M microbatches,  pcc --pp R           none (PyTorch's zero-bubble
#   ZB-H1                  --microbatches M     schedules hold two stages or
#                          --schedule zb-h1     more per rank)
# and after the table, pcc's pipelines' steps over its dp R step.
# pcc's ranks are MPI processes (`pcc run` starts them), PyTorch's R
# processes (torch.multiprocessing, forked) over gloo (bench/dist_peers.py
# says how each is set up). Each time is the median of steps 2..K of one
# run of K steps; beside it the loss of step 1 and of step K, which pcc and
# PyTorch compute alike (same weights, same batch, same loss). With
# --rounds R, each layout's pcc run and PyTorch run take turns R times
# (pcc compiles once), and each time is the median of the R runs' medians:
# this VM's speed moves by a third within minutes, and a run of each in
# turns puts the slow minutes on both.
#
#   bash bench/dist.sh [--batch B] [--seq T] [--steps K] [--ranks R]
#                      [--threads N] [--microbatches M]
#                      [--layers L] [--hidden H] [--vocab V]
#                      [--only pcc|torch] [--machine FILE] [--rounds R]
#
# pcc compiles with --machine FILE, the machine description its cost model
# plans by (the stage partition's cuts, the LM head's pieces); by default
# `pcc calibrate --ranks R` measures this machine at the start of each run
# into $PCC_BENCH_WORK/machine-rR.json (a file of an earlier hour described
# a VM whose speed had since moved: 47 GFLOP/s of products where a fresh
# calibration said 89).
#
# --layers, --hidden (heads: H / 64) and --vocab make a smaller GPT-2 for a
# quick run, e.g. `--layers 2 --batch 4 --seq 32 --steps 3`. --only runs
# one side (the other's column then reads "-"). Uses bench/run.sh's virtual
# environment ($PCC_BENCH_VENV, default ~/.cache/pcc-bench-venv, else
# /work/venv; it needs torch, transformers and onnx) and work folder
# ($PCC_BENCH_WORK, default /tmp/pcc-bench), where the export is kept and
# reused (GPT-2 124M's is run.sh's gpt2-124m-bBxT). Any failure ends the
# run with a non-zero status and the failing step's output.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$HERE")"
PCC="${PCC:-$ROOT/build/bin/pcc}"
BATCH=4
SEQ=128
STEPS=5
RANKS=2
THREADS=1
MICRO=4
LAYERS=12
HIDDEN=768
VOCAB=50257
ONLY=""
MACHINE=""
ROUNDS=1
usage="usage: bash bench/dist.sh [--batch B] [--seq T] [--steps K] [--ranks R] [--threads N] [--microbatches M] [--layers L] [--hidden H] [--vocab V] [--only pcc|torch] [--machine FILE] [--rounds R]"
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || { echo "$usage" >&2; exit 1; }
  case "$1" in
    --batch) BATCH="$2" ;;
    --seq) SEQ="$2" ;;
    --steps) STEPS="$2" ;;
    --ranks) RANKS="$2" ;;
    --threads) THREADS="$2" ;;
    --microbatches) MICRO="$2" ;;
    --layers) LAYERS="$2" ;;
    --hidden) HIDDEN="$2" ;;
    --vocab) VOCAB="$2" ;;
    --only) ONLY="$2" ;;
    --machine) MACHINE="$2" ;;
    --rounds) ROUNDS="$2" ;;
    *) echo "$usage" >&2; exit 1 ;;
  esac
  shift 2
done
fail() { echo "dist.sh: $*" >&2; exit 1; }
for v in BATCH SEQ STEPS RANKS THREADS MICRO LAYERS HIDDEN VOCAB ROUNDS; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || fail "$v must be a positive integer (got '${!v}')"
done
case "$ONLY" in ""|pcc|torch) ;; *) fail "--only takes pcc or torch" ;; esac
[ "$STEPS" -ge 2 ] || fail "--steps must be at least 2 (the median is of steps 2..K)"
[ "$RANKS" -ge 2 ] || fail "--ranks must be at least 2"
[ $((BATCH % RANKS)) -eq 0 ] || fail "batch $BATCH does not split over $RANKS ranks"
[ $((BATCH % MICRO)) -eq 0 ] || fail "batch $BATCH does not split into $MICRO microbatches"
[ "$LAYERS" -ge "$RANKS" ] || fail "$LAYERS layers cannot make $RANKS pipeline stages"
[ $((HIDDEN % 64)) -eq 0 ] || fail "--hidden must be a multiple of 64 (GPT-2's heads are 64 wide)"
HEADS=$((HIDDEN / 64))
[ -x "$PCC" ] || fail "$PCC not built (bash utils/setup.sh test builds it)"

VENV="${PCC_BENCH_VENV:-$HOME/.cache/pcc-bench-venv}"
if [ -z "${PCC_BENCH_VENV:-}" ] && [ ! -x "$VENV/bin/python" ] && [ -x /work/venv/bin/python ]; then
  VENV=/work/venv
fi
PY="$VENV/bin/python"
[ -x "$PY" ] || fail "no $PY: set PCC_BENCH_VENV, or run bench/run.sh once to make it"
WORK="${PCC_BENCH_WORK:-/tmp/pcc-bench}"
mkdir -p "$WORK"
if [ -z "$MACHINE" ] && [ "$ONLY" != torch ]; then
  MACHINE="$WORK/machine-r$RANKS.json"
  echo "dist.sh: calibrating this machine into $MACHINE" >&2
  "$PCC" calibrate -o "$MACHINE" --ranks "$RANKS" > "$WORK/calibrate.log" 2>&1 ||
    { cat "$WORK/calibrate.log" >&2; fail "pcc calibrate failed"; }
fi
[ -z "$MACHINE" ] || [ -f "$MACHINE" ] || fail "--machine $MACHINE: no such file"

if [ "$LAYERS.$HIDDEN.$VOCAB" = "12.768.50257" ]; then
  SIZE=small
  NAME="GPT-2 124M"
  MODEL="$WORK/gpt2-124m-b${BATCH}x${SEQ}"
else
  SIZE="${LAYERS}x${HIDDEN}x${HEADS}"
  NAME="GPT-2 of $LAYERS layers, hidden $HIDDEN, $HEADS heads, vocabulary $VOCAB"
  MODEL="$WORK/gpt2-${SIZE}-b${BATCH}x${SEQ}"
  [ "$VOCAB" = 50257 ] || MODEL="$MODEL-v$VOCAB"
fi
EXPORT=("$PY" "$HERE/export_gpt2.py" "$MODEL" --batch "$BATCH" --seq "$SEQ" --vocab "$VOCAB" --size "$SIZE")
if [ ! -f "$MODEL/model.onnx" ] || [ ! -f "$MODEL/state.pt" ] || [ ! -f "$MODEL/input_0.pb" ]; then
  echo "dist.sh: exporting $MODEL" >&2
  "${EXPORT[@]}" > "$WORK/dist-export.log" 2>&1 || { cat "$WORK/dist-export.log" >&2; fail "the export failed"; }
fi

# The layouts: name, label, pcc's flags, PyTorch's layout and label.
NAMES=(dp zero3 pp ppzb)
declare -A LABEL PCCFLAGS TORCH TORCHLABEL
LABEL[dp]="dp $RANKS"
PCCFLAGS[dp]="--dp $RANKS"
TORCH[dp]=ddp
TORCHLABEL[dp]=DDP
LABEL[zero3]="dp $RANKS, ZeRO 3"
PCCFLAGS[zero3]="--dp $RANKS --zero 3"
TORCH[zero3]=fsdp2
TORCHLABEL[zero3]=FSDP2
LABEL[pp]="pp $RANKS, $MICRO microbatches, 1F1B"
PCCFLAGS[pp]="--pp $RANKS --microbatches $MICRO --schedule 1f1b"
TORCH[pp]=pp
TORCHLABEL[pp]="torch.distributed.pipelining Schedule1F1B"
# pcc's zero-bubble schedule, without a peer: PyTorch's zero-bubble
# schedules (ScheduleInterleavedZeroBubble, ScheduleZBVZeroBubble) hold
# two or more stages per rank.
LABEL[ppzb]="pp $RANKS, $MICRO microbatches, ZB-H1"
PCCFLAGS[ppzb]="--pp $RANKS --microbatches $MICRO --schedule zb-h1"
TORCH[ppzb]=""

# Each sets CMD to a command (words) of layout NAME.
pcc_compile() {
  # shellcheck disable=SC2206
  local flags=(${PCCFLAGS[$1]})
  CMD=("$PCC" compile "$MODEL/model.onnx" -o "$WORK/dist-$1" --train --optimizer adamw
       --lr 1e-3 --weight-decay 0.01 --threads "$THREADS" --machine "$MACHINE" "${flags[@]}")
}
pcc_run() { CMD=("$PCC" run "$WORK/dist-$1" --input "$MODEL/input_0.pb" --steps "$STEPS"); }
torch_cmd() {
  CMD=("$PY" "$HERE/dist_peers.py" "$MODEL" --size "$SIZE" --layout "${TORCH[$1]}"
       --ranks "$RANKS" --threads "$THREADS" --steps "$STEPS" --microbatches "$MICRO")
}
show() { "$@"; echo "#   ${CMD[*]}"; }

echo "# $NAME, global batch $BATCH x $SEQ, AdamW (lr 1e-3, weight decay 0.01), $RANKS ranks x $THREADS thread(s)"
echo "# machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
[ -z "$MACHINE" ] || echo "# pcc's cost model: --machine $MACHINE"
echo "# versions: $("$PCC" --version | head -1); $("$PY" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)' 2>/dev/null)"
if [ "$ROUNDS" = 1 ]; then
  echo "# times: the median of steps 2..$STEPS of one run of $STEPS steps (PyTorch: each step the slowest rank's)"
else
  echo "# times: the median over $ROUNDS runs, pcc's and PyTorch's in turns, of each run's median of steps 2..$STEPS (PyTorch: each step the slowest rank's)"
fi
echo "# export: ${EXPORT[*]}"
for n in "${NAMES[@]}"; do
  echo "# ${LABEL[$n]}:"
  [ "$ONLY" = torch ] || { show pcc_compile "$n"; show pcc_run "$n"; }
  [ "$ONLY" = pcc ] || [ -z "${TORCH[$n]}" ] || show torch_cmd "$n"
done

# pcc's steps: "step N: loss X, ... Y ms" (rank 0's).
pcc_times() { # LOG: prints "median min loss1 lossK"
  python3 - "$1" "$STEPS" <<'EOF'
import re, statistics, sys
text = open(sys.argv[1]).read()
steps = re.findall(r"^step (\d+): loss ([-0-9.eE+naif]+), (?:.*, )?([0-9.]+) ms$", text, re.M)
if len(steps) != int(sys.argv[2]):
    sys.exit("dist.sh: cannot read %s step times in %s:\n%s" % (sys.argv[2], sys.argv[1], text))
later = [float(s[2]) for s in steps[1:]]
print("%.1f %.1f %s %s" % (statistics.median(later), min(later), steps[0][1], steps[-1][1]))
EOF
}

# The median of the first field of each line on stdin; the other fields
# of the first line.
median_of_rounds() {
  python3 -c '
import statistics, sys
rows = [l.split() for l in sys.stdin if l.strip()]
print(" ".join(["%.1f" % statistics.median(float(r[0]) for r in rows)] + rows[0][1:]))'
}

# Runs CMD with its output in LOG; on failure prints LOG and fails with
# the rest of the arguments.
run_logged() { # LOG MESSAGE...
  local log="$1"
  shift
  "${CMD[@]}" > "$log" 2>&1 || { cat "$log" >&2; fail "$*"; }
}

declare -A PCCRES TORCHRES
for n in "${NAMES[@]}"; do
  pres="" tres=""
  if [ "$ONLY" != torch ]; then
    echo "dist.sh: pcc, ${LABEL[$n]}: compiling" >&2
    rm -rf "$WORK/dist-$n"
    pcc_compile "$n"
    run_logged "$WORK/dist-$n.compile.log" "pcc compile failed (${LABEL[$n]})"
  fi
  for ((r = 1; r <= ROUNDS; ++r)); do
    if [ "$ONLY" != torch ]; then
      echo "dist.sh: pcc, ${LABEL[$n]}, run $r of $ROUNDS" >&2
      pcc_run "$n"
      run_logged "$WORK/dist-$n.run.log" "pcc run failed (${LABEL[$n]})"
      pres+="$(pcc_times "$WORK/dist-$n.run.log")"$'\n'
    fi
    if [ "$ONLY" != pcc ] && [ -n "${TORCH[$n]}" ]; then
      echo "dist.sh: PyTorch, ${TORCHLABEL[$n]}, run $r of $ROUNDS" >&2
      torch_cmd "$n"
      run_logged "$WORK/dist-$n.torch.log" "PyTorch failed (${TORCHLABEL[$n]})"
      res="$(grep '^RESULT ' "$WORK/dist-$n.torch.log" | awk '{print $3, $4, $5, $6}' || true)"
      [ -n "$res" ] || { cat "$WORK/dist-$n.torch.log" >&2; fail "no result from PyTorch (${TORCHLABEL[$n]})"; }
      tres+="$res"$'\n'
    fi
  done
  [ -z "$pres" ] || PCCRES[$n]="$(printf '%s' "$pres" | median_of_rounds)"
  [ -z "$tres" ] || TORCHRES[$n]="$(printf '%s' "$tres" | median_of_rounds)"
  rm -rf "$WORK/dist-$n"
done

echo
echo "| layout | pcc | PyTorch (gloo) | ratio | loss, steps 1 and $STEPS: pcc / PyTorch |"
echo "|---|---|---|---|---|"
for n in "${NAMES[@]}"; do
  read -r pm _ pl1 plk <<< "${PCCRES[$n]:-- - - -}"
  read -r tm _ tl1 tlk <<< "${TORCHRES[$n]:-- - - -}"
  ratio=$(awk -v a="$pm" -v b="$tm" 'BEGIN {if (a != "-" && b != "-" && b > 0) printf "%.2f", a / b; else print "-"}')
  pcell="-"; [ "$pm" = - ] || pcell="$pm ms"
  tcell="-"; [ "$tm" = - ] || tcell="${TORCHLABEL[$n]} $tm ms"
  echo "| ${LABEL[$n]} | $pcell | $tcell | $ratio | $pl1, $plk / $tl1, $tlk |"
done
# pcc's pipelines against its own data parallelism at the same global batch.
if [ "$ONLY" != torch ]; then
  read -r dpm _ <<< "${PCCRES[dp]}"
  line="pcc's pp $RANKS / dp $RANKS:"
  for n in pp ppzb; do
    read -r m _ <<< "${PCCRES[$n]}"
    line+=" $(awk -v a="$m" -v b="$dpm" -v l="${LABEL[$n]##*, }" 'BEGIN {printf "%s %.2f,", l, a / b}')"
  done
  echo
  echo "${line%,}"
fi
