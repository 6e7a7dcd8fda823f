#!/bin/bash
# The training step's peak resident memory, pcc's against PyTorch eager's,
# one after the other on this machine: GPT-2 124M at batch 1 x 1024 (or
# what --batch/--seq give), AdamW, 4 steps each, under GNU time's maximum
# RSS. pcc's rows are each --recompute mode given (none by default), with
# the peak its compile planned (report.json per_rank_bytes).
#
# usage: PCC_BENCH_VENV=VENV bash bench/memory.sh [--batch B] [--seq T]
#        [--recompute "none full auto:3.2GB"]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
batch=1 seq=1024 modes="none" threads=$(nproc)
while [ $# -gt 0 ]; do
  case "$1" in
    --batch) batch=$2; shift 2 ;;
    --seq) seq=$2; shift 2 ;;
    --recompute) modes=$2; shift 2 ;;
    *) echo "bench/memory.sh: unknown option $1" >&2; exit 1 ;;
  esac
done
venv=${PCC_BENCH_VENV:?set PCC_BENCH_VENV to a venv with torch and onnx}
pcc=${PCC:-$root/build/bin/pcc}
work=${PCC_BENCH_DIR:-/tmp/pcc-bench}
model=$work/gpt2-small-b${batch}s${seq}
[ -f "$model/model.onnx" ] ||
  "$venv/bin/python" "$here/export_gpt2.py" "$model" --batch "$batch" --seq "$seq"
rss() { awk 'END { printf "%.2f", $1 / 1e6 }' "$1"; }
echo "GPT-2 124M, batch $batch x $seq, AdamW, $threads threads: peak resident memory (GB)"
for mode in $modes; do
  flags=(--train)
  case "$mode" in
    none) ;;
    auto:*) flags+=(--recompute auto --memory-budget "${mode#auto:}") ;;
    *) flags+=(--recompute "$mode") ;;
  esac
  out=$work/memory-$mode
  "$pcc" compile "$model/model.onnx" -o "$out" "${flags[@]}" > /dev/null
  planned=$("$venv/bin/python" -c "import json; print('%.2f' % (json.load(open('$out/report.json'))['memory']['per_rank_bytes'][0] / 1e9))")
  /usr/bin/time -f %M -o "$out.rss" "$pcc" run "$out" --input "$model/input_0.pb" --steps 4 > /dev/null
  echo "pcc --recompute $mode: $(rss "$out.rss") (planned $planned)"
  rm -rf "$out" "$out.rss"
done
/usr/bin/time -f %M -o "$work/memory-torch.rss" "$venv/bin/python" "$here/memory_torch.py" "$model" --threads "$threads" > /dev/null
echo "PyTorch eager: $(rss "$work/memory-torch.rss")"
rm -f "$work/memory-torch.rss"
