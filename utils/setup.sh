#!/usr/bin/env bash
# Sets pcc up on a Debian 12 machine and runs one of its two jobs:
#   utils/setup.sh demo   build, then compile and run the bundled gpt2-tiny
#                         model on the CPU target and check its logits
#   utils/setup.sh test   build, then run every test suite
# Idempotent: installs only missing packages, reuses an existing build.
set -euo pipefail

job=${1:-}
case "$job" in
  demo|test) ;;
  *) echo "usage: $0 demo|test" >&2; exit 2 ;;
esac

root=$(cd "$(dirname "$0")/.." && pwd)
build=${PCC_BUILD_DIR:-$root/build}

packages=(cmake ninja-build g++ libmlir-22-dev mlir-22-tools llvm-22-dev
  llvm-22-tools libprotobuf-dev protobuf-compiler libonnx-dev python3-onnx
  python3-numpy libonnx-testdata libgtest-dev libopenblas-dev clang-22
  libclang-rt-22-dev libopenmpi-dev openmpi-bin curl libicu-dev
  libcpp-httplib-dev pybind11-dev python3-dev python3-pytest python3-venv)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
ninja -C "$build"

if [ "$job" = demo ]; then
  demo="$build/demo"
  rm -rf "$demo" && mkdir -p "$demo"
  tar xzf "$root/test/models/gpt2-tiny.tar.gz" -C "$demo"
  set -x
  "$build/bin/pcc" compile "$demo/gpt2-tiny/model.onnx" -o "$demo/out"
  "$build/bin/pcc" run "$demo/out" --input "$demo/gpt2-tiny/ref/input_0.pb" \
    --dump "$demo/dump"
  /usr/bin/python3 "$root/test/e2e/compare_outputs.py" \
    "$demo/dump/outputs.safetensors" "$demo/gpt2-tiny/ref/output_0.pb" --tol 1e-4
  exit 0
fi

# ONNX 1.20's node tests, for the second conformance run (skipped, with
# this warning, where PyPI cannot be reached).
"$root/utils/fetch-onnx-node-tests.sh" "$build/onnx-1.20" ||
  echo "setup: warning: cannot fetch ONNX 1.20's node tests; onnx-node-tests-1.20 is skipped" >&2
# The openai client package for the serving tests (skipped, with this
# warning, where PyPI cannot be reached).
venv="$build/test-venv"
if ! "$venv/bin/python3" -c "import openai" 2>/dev/null; then
  /usr/bin/python3 -m venv --system-site-packages "$venv" &&
    "$venv/bin/pip" install -q openai ||
    echo "setup: warning: cannot install the openai package; the serving tests that use it are skipped" >&2
fi
# Every suite: lit (dialect, import, bad input, end-to-end models), the
# runtime's GoogleTests and the ONNX node-test conformance runs.
ctest --test-dir "$build" --output-on-failure
# A short, seeded libFuzzer run of the parsers of untrusted bytes.
"$root/test/fuzz/run-fuzzers.sh" "$build" "${PCC_FUZZ_RUNS:-300000}"
