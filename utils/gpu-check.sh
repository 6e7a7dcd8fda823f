#!/usr/bin/env bash
# pcc's CUDA target on a real GPU, in one run: the checks of
# test/e2e/cuda/gpu.test (the five reference models' logits, the decoders'
# gradients and three SGD steps against PyTorch, f32, 1e-3), a bf16
# training run, then bench/gpu.sh (GPT-2 124M against PyTorch eager and
# torch.compile). For a GPU machine with nvcc and PyTorch but without
# pcc's build dependencies:
#
#   here:  bash utils/portable-pcc.sh .gpu/pcc.txz   (.gpu/ ignored by git)
#   there: bash utils/gpu-check.sh .gpu/pcc.txz [LOG]
#
# Prints one FAIL line per failed check and "gpu-check: N failure(s)" at the
# end; exits 1 if any. PCC_GPU_BENCH_LIMIT bounds the benchmark (seconds,
# default 360; 0 skips it).
set -u
pkg=${1:?usage: bash utils/gpu-check.sh PCC.txz [LOG]}
log=${2:-${OUT:-.}/gpu-check.log}
root=$(cd "$(dirname "$0")/.." && pwd)
# Everything goes to the log and to stdout; no process substitution, whose
# tee a bare `wait` would wait for.
{
t0=$(date +%s)
step() { echo "=== [+$(($(date +%s) - t0)) s] $*"; }
work=$(mktemp -d)
tar xf "$pkg" -C "$work"
pcc=$work/pcc-portable/pcc
export PATH=/usr/local/cuda/bin:$PATH
step setup
# The kernels link -lcublasLt from the toolkit beside nvcc. Where the
# toolkit has no cuBLASLt (an image that has it from PyTorch's wheels
# only), the wheel's copy is linked through LIBRARY_PATH.
toolkit=$(dirname "$(dirname "$(command -v nvcc)")")
cublas=$toolkit/lib64
if ! ls "$cublas"/libcublasLt.so >/dev/null 2>&1; then
  wheel=$(python3 -c 'import nvidia.cublas as c, os; print(os.path.join(list(c.__path__)[0], "lib"))' 2>/dev/null)
  so=$(ls "$wheel"/libcublasLt.so.* 2>/dev/null | head -1)
  echo "no libcublasLt.so in $cublas; linking ${so:-nothing found in the wheels}"
  cublas=$work/cublas
  mkdir -p "$cublas"
  [ -n "$so" ] && ln -s "$so" "$cublas/libcublasLt.so" && ln -s "$so" "$cublas/$(basename "$so")"
  export LIBRARY_PATH=$cublas${LIBRARY_PATH:+:$LIBRARY_PATH}
fi
export LD_LIBRARY_PATH=$cublas:$work/pcc-portable/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi -L; nvcc --version | tail -1; "$pcc" --version | head -1
python3 -c 'import torch, onnx; print("torch", torch.__version__, "onnx", onnx.__version__)'
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
fwd="gpt2-tiny llama-tiny mlp-tiny nanogpt-tiny bert-tiny"
dec="gpt2-tiny llama-tiny mlp-tiny nanogpt-tiny"
for m in $fwd; do tar xzf "$root/test/models/$m.tar.gz" -C "$work"; done

step "CUDA builds, in parallel"
pids=()
for m in $fwd; do
  timeout 300 "$pcc" compile "$work/$m/model.onnx" -o "$work/$m.fwd" --target cuda \
    > "$work/$m.fwd.log" 2>&1 & pids+=($!)
done
for m in $dec; do
  timeout 300 "$pcc" compile "$work/$m/model.onnx" -o "$work/$m.train" --target cuda \
    --train --optimizer sgd --lr 0.1 > "$work/$m.train.log" 2>&1 & pids+=($!)
done
timeout 300 "$pcc" compile "$work/gpt2-tiny/model.onnx" -o "$work/bf16" --target cuda \
  --train --dtype bf16 > "$work/bf16.log" 2>&1 & pids+=($!)
for p in "${pids[@]}"; do wait "$p"; done
for f in "$work"/*.log; do
  grep -q "^pcc: compiled" "$f" || { fail "compile $(basename "$f" .log)"; tail -5 "$f"; }
done

step "forward: logits against PyTorch's (1e-3 x max|ref|)"
for m in $fwd; do
  timeout 60 "$pcc" run "$work/$m.fwd" --input "$work/$m/ref/input_0.pb" --dump "$work/$m.dump" | tail -1
  python3 "$root/test/e2e/compare_outputs.py" "$work/$m.dump/outputs.safetensors" \
    "$work/$m/ref/output_0.pb" --tol 1e-3 || fail "logits $m"
  timeout 60 "$pcc" run "$work/$m.fwd" --input "$work/$m/ref/input_0.pb" --steps 20 | tail -1
done

step "training: loss and gradients (1e-3), three SGD steps (1e-3 relative)"
for m in $dec; do
  timeout 60 "$pcc" run "$work/$m.train" --input "$work/$m/ref/input_0.pb" --steps 3 \
    --dump "$work/$m.tdump" > "$work/$m.steps" 2>&1
  cat "$work/$m.steps"
  python3 "$root/test/e2e/compare_grads.py" "$work/$m.tdump" "$work/$m" --loss-rtol 1e-3 \
    --grad-tol 1e-3 | grep -v '^ok [^g]' || fail "gradients $m"
  python3 "$root/test/e2e/check_sgd.py" "$work/$m.steps" "$root/test/models/$m.sgd.json" \
    --rtol 1e-3 || fail "sgd $m"
done

step "bf16 training, gpt2-tiny (AdamW, 5 steps)"
timeout 60 "$pcc" run "$work/bf16" --input "$work/gpt2-tiny/ref/input_0.pb" --steps 5 | tail -6

limit=${PCC_GPU_BENCH_LIMIT:-360}
if [ "$limit" != 0 ]; then
  step "bench/gpu.sh"
  # The machine's own PyTorch: no network there for the benchmark's venv.
  mkdir -p "$work/venv/bin"
  printf '#!/bin/sh\nexec python3 "$@"\n' > "$work/venv/bin/python"
  chmod +x "$work/venv/bin/python"
  PCC_BENCH_VENV=$work/venv PCC=$pcc PCC_BENCH_WORK=$work/bench \
    timeout "$limit" bash "$root/bench/gpu.sh" --steps 10 || fail "bench/gpu.sh (rc $?)"
fi
step "gpu-check: $fails failure(s)"
echo "$fails" > "$work/fails"
} 2>&1 | tee "$log"
exit "$(( $(tail -1 "$log" | grep -c ' 0 failure') == 1 ? 0 : 1 ))"
