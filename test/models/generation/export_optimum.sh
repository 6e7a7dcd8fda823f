#!/usr/bin/env bash
# Optimum's with-past exports of the GPT-2 and Llama of gpt2-dyn / llama-dyn:
# gpt2-optimum-past.tar.gz and llama-optimum-past.tar.gz (README.md,
# "Optimum's plain exports").
#
#   bash export_optimum.sh [NAME ...]        (NAME: a model of
#                                            export_generation.py; default
#                                            gpt2 and llama)
#
# For each NAME, in $WORK (default /tmp/pcc-generation-optimum):
#   hf-NAME/            the model export_generation.py builds (MODELS[NAME](),
#                       seeded and perturbed as its make() does), saved with
#                       save_pretrained by the main venv ($VENV, /work/venv)
#   NAME-optimum-past/  model.onnx (+ model.onnx_data if Optimum writes one)
#                       from `optimum-cli export onnx --model hf-NAME --task
#                       text-generation-with-past` run from Optimum's venv
#                       ($OPT_VENV, /work/venv-optimum; bench/generate.sh
#                       makes it), and generate.json copied from
#                       NAME-dyn.tar.gz (same weights, same tokens)
# Before packing, onnxruntime checks that the export has the same weights as
# NAME-dyn: its logits with an empty past (past_sequence_length 0), an
# all-ones attention_mask and position_ids 0 .. S-1 against NAME-dyn's
# model.onnx on the same input_ids (max |diff| < 1e-4), and that its argmax
# over prompt + tokens gives generate.json's tokens. The archives are packed
# with mtime 0 and owner 0, as export_generation.py packs its archives: with
# the same packages two runs give the same bytes.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
VENV="${VENV:-/work/venv}"
OPT_VENV="${OPT_VENV:-/work/venv-optimum}"
WORK="${WORK:-/tmp/pcc-generation-optimum}"
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(gpt2 llama)

mkdir -p "$WORK"
for name in "${names[@]}"; do
  tag="$name-optimum-past"
  rm -rf "$WORK/hf-$name" "$WORK/$tag" "$WORK/$tag.export" "$WORK/$name-dyn"

  # The model of NAME-dyn, saved for Optimum.
  "$VENV/bin/python" - "$HERE" "$name" "$WORK/hf-$name" <<'EOF'
import sys
import torch
sys.path.insert(0, sys.argv[1])
import export_generation as eg
name, out = sys.argv[2], sys.argv[3]
torch.set_num_threads(1)
model = eg.build(name)
model.save_pretrained(out)
EOF

  "$OPT_VENV/bin/optimum-cli" export onnx --model "$WORK/hf-$name" \
    --task text-generation-with-past "$WORK/$tag.export" > "$WORK/$tag.log" 2>&1 ||
    { tail -40 "$WORK/$tag.log" >&2; exit 1; }

  tar xzf "$HERE/$name-dyn.tar.gz" -C "$WORK"
  mkdir "$WORK/$tag"
  cp "$WORK/$tag.export/model.onnx" "$WORK/$tag/"
  [ ! -e "$WORK/$tag.export/model.onnx_data" ] || cp "$WORK/$tag.export/model.onnx_data" "$WORK/$tag/"
  cp "$WORK/$name-dyn/generate.json" "$WORK/$tag/"

  # Same weights as NAME-dyn: logits with an empty past.
  "$VENV/bin/python" - "$WORK/$tag/model.onnx" "$WORK/$name-dyn/model.onnx" <<'EOF'
import json, os, sys
import numpy as np
import onnx
import onnxruntime as ort
past_path, dyn_path = sys.argv[1], sys.argv[2]
so = ort.SessionOptions()
so.intra_op_num_threads = 1
past = ort.InferenceSession(past_path, so, providers=["CPUExecutionProvider"])
dyn = ort.InferenceSession(dyn_path, so, providers=["CPUExecutionProvider"])
ins = {i.name: i for i in past.get_inputs()}
outs = [o.name for o in past.get_outputs()]
print(os.path.basename(os.path.dirname(past_path)), "inputs",
      [(i.name, i.shape) for i in past.get_inputs()], "outputs",
      [(o.name, o.shape) for o in past.get_outputs()], flush=True)
# position_ids where the model takes them (BLOOM's ALiBi reads the mask).
assert {"input_ids", "attention_mask"} <= set(ins), list(ins)
assert any(n.startswith("past_key_values.") for n in ins), list(ins)
assert outs[0] == "logits" and any(n.startswith("present.") for n in outs), outs
m = onnx.load(past_path, load_external_data=False)
print("  opset", [(o.domain or "ai.onnx", o.version) for o in m.opset_import],
      len(m.graph.node), "nodes", flush=True)

def run_past(ids):
    b, s = ids.shape
    feed = {"input_ids": ids, "attention_mask": np.ones((b, s), np.int64)}
    if "position_ids" in ins:
        feed["position_ids"] = np.tile(np.arange(s, dtype=np.int64), (b, 1))
    for n, i in ins.items():
        if n.startswith("past_key_values."):
            # [batch, kv heads, past_sequence_length = 0, head dim]
            shape = [b if k == 0 else (0 if k == 2 else d) for k, d in enumerate(i.shape)]
            assert all(isinstance(d, int) for d in shape), (n, i.shape)
            feed[n] = np.zeros(shape, np.float32)
    return past.run(["logits"], feed)[0]

worst = 0.0
for seed, shape in enumerate([(1, 20), (3, 7), (1, 1), (2, 30)]):
    ids = np.random.default_rng(seed).integers(0, 384, shape).astype(np.int64)
    a = run_past(ids)
    r = dyn.run(["logits"], {"input_ids": ids})[0]
    d = float(np.abs(a - r).max())
    print("  logits vs %s at %s: max |diff| %.2e" % (
        os.path.basename(os.path.dirname(dyn_path)), list(shape), d), flush=True)
    assert a.shape == r.shape and d < 1e-4, (shape, a.shape, r.shape, d)
    worst = max(worst, d)
# The greedy tokens of generate.json, over prompt + tokens.
ref = json.load(open(os.path.join(os.path.dirname(past_path), "generate.json")))
for p, t in zip(ref["prompts"], ref["tokens"]):
    lg = run_past(np.array([p + t], np.int64))[0]
    assert lg[len(p) - 1:-1].argmax(-1).tolist() == t, (p, t)
print("  ok: max |diff| %.2e; generate.json's greedy tokens match" % worst, flush=True)
EOF

  "$VENV/bin/python" - "$WORK" "$tag" "$HERE/$tag.tar.gz" <<'EOF'
import gzip, os, sys, tarfile
work, tag, tgz = sys.argv[1:]
def reproducible(info):
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info
with open(tgz, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz, \
        tarfile.open(fileobj=gz, mode="w") as t:
    t.add(os.path.join(work, tag), arcname=tag, filter=reproducible)
print(tgz, os.path.getsize(tgz), "bytes", flush=True)
EOF
done
