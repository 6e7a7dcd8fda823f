#!/usr/bin/env bash
# Builds pcc's libFuzzer targets with clang-22 (ASan + UBSan) and runs each
# on the ONNX importer, the TensorProto decoder, the safetensors reader,
# pcc generate's requests parser, the tokenizer.json reader and the chat
# template parser and renderer, i.e. every parser of untrusted bytes.
#   test/fuzz/run-fuzzers.sh BUILD_DIR [RUNS]
# RUNS inputs per target with a fixed seed (default 300000, about 20 s
# each), so that CI explores the same inputs every time; for a longer,
# randomized campaign run a fuzzer binary from BUILD_DIR/fuzz by hand.
# Every run is limited to 2 GB of RSS and 60 s per input: a model that
# makes pcc allocate or compute without bound fails the run.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$1" && pwd)
runs=${2:-300000}
out="$build/fuzz"
mkdir -p "$out"
cxx=${PCC_FUZZ_CXX:-clang++-22}
flags=(-std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined
  -fno-sanitize-recover=undefined -fexceptions)

# The runtime parsers depend on nothing but the standard library.
rt_src=("$root"/runtime/lib/{Tensor,TensorProto,Safetensors,Model,Shard,Comm}.cpp)
for f in TensorProto Safetensors; do
  "$cxx" "${flags[@]}" -I"$root/runtime/include" \
    "$root/runtime/lib/fuzz/${f}Fuzzer.cpp" "${rt_src[@]}" -ldl \
    -o "$out/$f-fuzzer"
done

# The importer, instrumented together with the dialect it builds.
mlir_inc=/usr/lib/llvm-22/include
"$cxx" "${flags[@]}" -DONNX_ML=1 -DONNX_NAMESPACE=onnx \
  -I"$root/include" -I"$build/include" -isystem "$mlir_inc" \
  "$root/test/fuzz/ImportFuzzer.cpp" "$root"/lib/Import/*.cpp \
  "$root"/lib/Dialect/Graph/IR/*.cpp \
  -L/usr/lib/llvm-22/lib -Wl,-rpath,/usr/lib/llvm-22/lib -lMLIR -lLLVM \
  -lonnx -lonnx_proto -lprotobuf -o "$out/Import-fuzzer"

# pcc generate's requests parser, over LLVM's JSON reader (with the
# tokenizer its text prompts go through).
"$cxx" "${flags[@]}" -I"$root/include" -I"$root/runtime/include" \
  -isystem "$mlir_inc" "$root/test/fuzz/GenerationRequestsFuzzer.cpp" \
  "$root/lib/Driver/GenerationRequests.cpp" "$root/runtime/lib/Sampling.cpp" \
  "$root"/lib/Tokenizer/*.cpp \
  -L/usr/lib/llvm-22/lib -Wl,-rpath,/usr/lib/llvm-22/lib -lLLVM \
  -licuuc -licui18n -o "$out/Requests-fuzzer"

# pcc's tokenizer.json reader (lib/Tokenizer), over LLVM's JSON reader and
# ICU.
"$cxx" "${flags[@]}" -I"$root/include" -isystem "$mlir_inc" \
  "$root/test/fuzz/TokenizerFuzzer.cpp" "$root"/lib/Tokenizer/*.cpp \
  -L/usr/lib/llvm-22/lib -Wl,-rpath,/usr/lib/llvm-22/lib -lLLVM \
  -licuuc -licui18n -o "$out/Tokenizer-fuzzer"

# Chat templates (lib/Tokenizer/ChatTemplate.cpp), over LLVM's JSON and
# Unicode support.
"$cxx" "${flags[@]}" -I"$root/include" -isystem "$mlir_inc" \
  "$root/test/fuzz/ChatTemplateFuzzer.cpp" "$root/lib/Tokenizer/ChatTemplate.cpp" \
  -L/usr/lib/llvm-22/lib -Wl,-rpath,/usr/lib/llvm-22/lib -lLLVM \
  -o "$out/ChatTemplate-fuzzer"

# Seeds: the trained tokenizer.json files of the tokenizer tests, and a
# dictionary of their keywords.
mkdir -p "$out/seed-tokenizer"
cp "$root"/test/tokenizer/data/*.json "$out/seed-tokenizer/"
printf '"%s"\n' '\"type\"' '\"BPE\"' '\"vocab\"' '\"merges\"' \
  '\"added_tokens\"' '\"normalizer\"' '\"pre_tokenizer\"' '\"decoder\"' \
  '\"Sequence\"' '\"ByteLevel\"' '\"Split\"' '\"Metaspace\"' '\"Digits\"' \
  '\"Replace\"' '\"Prepend\"' '\"Strip\"' '\"Fuse\"' '\"ByteFallback\"' \
  '\"NFC\"' '\"Regex\"' '\"String\"' '\"byte_fallback\"' '\"unk_token\"' \
  '\"lstrip\"' '\"rstrip\"' '\"single_word\"' '\"normalized\"' \
  '\\\\p{L}' '<0x41>' > "$out/tokenizer.dict"

# Seeds: the text-format import tests and small TensorProto / safetensors
# files written by the tests.
mkdir -p "$out/seed-import" "$out/seed-tp" "$out/seed-st" "$out/seed-requests"
printf '{"prompt": [1, 2, 3]}\n{"prompt": [5], "max_new_tokens": 4, "stop": [7]}\n' \
  > "$out/seed-requests/two.jsonl"
printf '{"prompt": [200, 1], "temperature": 0.8, "top_k": 5, "top_p": 0.9, "seed": 3, "arrival_step": 2}\n' \
  > "$out/seed-requests/sampled.jsonl"
printf '{"prompt": "the quick brown fox \\u00fcber \\ud83d\\ude42"}\n' \
  > "$out/seed-requests/text.jsonl"
printf '{"messages": [{"role": "user", "content": "Hi"}], "max_new_tokens": 2}\n' \
  > "$out/seed-requests/chat.jsonl"
printf '{"do_sample": true, "top_k": 20, "repetition_penalty": 1.05, "eos_token_id": [2, 7], "min_new_tokens": 1, "num_beams": 1}\n' \
  > "$out/seed-requests/generation_config.json"
export PCC_FUZZ_TOKENIZER="$root/test/e2e/serve/tokenizer-384.json"
cp "$root"/test/Import/*.onnxtxt "$out/seed-import/" 2>/dev/null || true
find "$root/test" -name '*.onnx' -size -64k -exec cp {} "$out/seed-import/" \; 2>/dev/null || true

export ASAN_OPTIONS=detect_leaks=0:detect_container_overflow=0
status=0
mkdir -p "$out/seed-chat"
cp "$root"/test/tokenizer/data/chat/*.jinja "$out/seed-chat/"
for f in Import TensorProto Safetensors Requests Tokenizer ChatTemplate; do
  seed="$out/seed-import"
  [ "$f" = TensorProto ] && seed="$out/seed-tp"
  [ "$f" = Safetensors ] && seed="$out/seed-st"
  [ "$f" = Requests ] && seed="$out/seed-requests"
  extra=(); n=$runs
  if [ "$f" = ChatTemplate ]; then
    # About 1900 runs/s: a fifth of the runs, about 30 s.
    seed="$out/seed-chat"; n=$((runs / 5))
  fi
  if [ "$f" = Tokenizer ]; then
    # Its seeds reach 113 KB (the later -max_len wins); about 640 runs/s,
    # so a tenth of the runs, about 50 s.
    seed="$out/seed-tokenizer"; n=$((runs / 10))
    extra=(-max_len=131072 -dict="$out/tokenizer.dict")
  fi
  echo "fuzz: $f, $n runs"
  if ! "$out/$f-fuzzer" -seed=1 -runs="$n" -max_len=65536 "${extra[@]}" \
      -rss_limit_mb=2048 -timeout=60 -print_final_stats=0 -artifact_prefix="$out/$f-" "$seed" \
      >"$out/$f.log" 2>&1; then
    echo "fuzz: $f FAILED (see $out/$f.log)"; tail -30 "$out/$f.log"
    status=1
  else
    echo "fuzz: $f ok ($(grep -c '^#' "$out/$f.log" || true) progress lines)"
  fi
done
exit $status
