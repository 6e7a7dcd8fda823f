#!/usr/bin/env python3
"""Greedy text generation on the CPU: pcc against its peers, side by side in
one run on one machine. bench/generate.sh installs the peers and calls it.

usage: python generate.py [--layers N] [--threads N] [--runs R]
                          [--prompt-len P] [--new-tokens T] [--batches 1,8]
                          [--pcc PCC] [--optimum-venv DIR] [--work DIR]
                          [--json FILE] [--peers ort,ct2,pcc]

The model is GPT-2 124M's architecture (GPT2Config()'s defaults: 12 layers,
hidden 768, 12 heads, vocabulary 50257, 1024 positions; --layers N keeps
N layers) with PyTorch's random initialization after torch.manual_seed(0),
float32, eval, eager attention. The prompts are random ids (seed 1), P
tokens each (default 32); each system generates T new tokens (default 64)
greedily for one prompt (batch 1) and for 8 prompts at once (batch 8, all of
length P: no padding).

The systems, each given the same threads (--threads, default all cores):
  transformers  model.generate(do_sample=False, use_cache=True,
                max_new_tokens=T, min_new_tokens=T), attention mask all ones:
                eager PyTorch with its KV cache. Its tokens are the reference.
  onnxruntime   Optimum's with-past export (optimum-cli export onnx --task
                text-generation-with-past, run from its own venv because
                optimum wants transformers 4.x), CPU provider,
                intra_op_num_threads = threads, and this file's greedy loop:
                one prefill run, then one run per token that feeds the
                presents back as the past (I/O binding, the KV cache stays
                in onnxruntime's buffers).
  ctranslate2   ctranslate2's converter (float32), Generator.generate_batch(
                include_prompt_in_result=False, max_length=T, min_length=T,
                sampling_topk=1), intra_threads = threads.
  pcc           the plain export pcc takes (input_ids -> logits, dynamo,
                optimize=False, opset 18), `pcc compile --generate
                --max-seq P+T --threads N` twice: --max-batch 8
                --max-tokens 8*P (every prompt of batch 8 in one prefill
                step), and --max-batch 1 --max-tokens P (batch 1 alone);
                `pcc generate` prints the seconds it spent generating.

Timing: loading and conversion are never timed. Every system runs each case
once untimed (warm-up), then R rounds (default 3) in which every system runs
it once, in turn (the order rotates each round), so that a virtual machine's
slow moments fall on all alike. The figure is the best (minimum) of the R
runs; the JSON keeps every run and the median. pcc's seconds come from
`pcc generate`'s summary line (tokens / tokens per second, which has more
digits than its seconds): its generate call, from the first step to the
last, loading the build excluded (it packs the weights' operands for its
GEMM micro-kernel, "prepared operands", before its timer, as onnxruntime
prepacks at session creation and CTranslate2 at loading).

The floor: greedy decoding reads every weight once per step (the first
token's prefill step included), so T steps take at least
  (weight bytes, float32, tied embedding once) x T / memory bandwidth;
the bandwidth is measured with numpy copying a 1 GiB float32 array, in one
thread and in --threads threads (each its share), counting the bytes read
and written (STREAM's copy), the best of 5; the higher is used.

Correctness: every system's tokens are compared with transformers' for the
same case, prompt by prompt; mismatching prompts are counted and printed,
never hidden. The smallest gap between transformers' best and second-best
logit (at any step) is printed: where it is tiny, rounding can flip a token.
min_new_tokens (and CTranslate2's min_length) mask the EOS id (50256) at
every step; pcc and the onnxruntime loop do not, so the number of steps at
which transformers' unmasked argmax was EOS is printed too (0: the masking
changed nothing).

pcc's figure for batch 1 is the faster of its two builds (both are shown);
for batch 8, the --max-batch 8 build.
"""
import argparse
import concurrent.futures
import contextlib
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def run_quiet(cmd, logfile, **kw):
    """Runs cmd with its output in logfile; on failure, shows the log's tail."""
    with open(logfile, "w") as f:
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, **kw)
    if r.returncode != 0:
        with open(logfile) as f:
            tail = f.read()[-4000:]
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{tail}")


# ---------------------------------------------------------------- the model

def build_model(layers):
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=layers, attn_implementation="eager")
    return GPT2LMHeadModel(cfg).float().eval()


class Logits(torch.nn.Module):
    """The export pcc takes: forward(input_ids) -> logits, no mask, no cache."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids):
        return self.m(input_ids=input_ids, use_cache=False).logits


def export_for_pcc(model, path):
    """input_ids [batch, seq] (both dynamic) -> logits, as
    test/models/generation/export_generation.py makes them."""
    example = torch.randint(0, model.config.vocab_size, (2, 20),
                            generator=torch.Generator().manual_seed(1))
    Dim = torch.export.Dim
    shapes = {"input_ids": {0: Dim("batch", min=1, max=64),
                            1: Dim("seq", min=1, max=model.config.n_positions)}}
    with contextlib.redirect_stdout(sys.stderr):     # the exporter's progress
        prog = torch.onnx.export(Logits(model), (example,), dynamo=True, optimize=False,
                                 opset_version=18, dynamic_shapes=shapes,
                                 input_names=["input_ids"], output_names=["logits"])
        prog.save(path)


def export_optimum(optimum_venv, hf_dir, out_dir, logfile):
    """Optimum's with-past export of the saved model (its own venv)."""
    run_quiet([os.path.join(optimum_venv, "bin", "optimum-cli"), "export", "onnx",
               "--model", hf_dir, "--task", "text-generation-with-past", out_dir],
              logfile)
    return os.path.join(out_dir, "model.onnx")


def convert_ct2(hf_dir, out_dir):
    """ctranslate2's transformers converter, float32. Random weights come with
    no tokenizer, so the vocabulary is the ids written as strings ("0" ..
    "50256"): generate_batch takes and returns those, the same ids."""
    from ctranslate2.converters.transformers import TransformersConverter

    class IdsTokenizer:
        def __init__(self, n, special):
            self.n = n
            self.bos_token = self.eos_token = self.unk_token = special

        def get_vocab(self):
            return {str(i): i for i in range(self.n)}

    class Converter(TransformersConverter):
        def load_tokenizer(self, tokenizer_class, path, **kw):
            from transformers import AutoConfig
            c = AutoConfig.from_pretrained(path)
            eos = c.eos_token_id if c.eos_token_id is not None else c.vocab_size - 1
            return IdsTokenizer(c.vocab_size, str(eos))

    Converter(hf_dir).convert(out_dir, quantization="float32", force=True)


# ---------------------------------------------------------------- runners
# Each runner: setup once (untimed), then run(prompts) -> (seconds, tokens),
# tokens a list of lists of new token ids, one per prompt.

class HF:
    name = "transformers"
    label = "transformers (eager, KV cache)"

    def __init__(self, model, new, threads):
        self.model, self.new = model, new
        torch.set_num_threads(threads)
        self.pad = model.config.eos_token_id if model.config.eos_token_id is not None else 0

    def generate(self, ids, **extra):
        with torch.inference_mode():
            return self.model.generate(
                ids, attention_mask=torch.ones_like(ids), do_sample=False,
                use_cache=True, max_new_tokens=self.new, min_new_tokens=self.new,
                pad_token_id=self.pad, **extra)

    def run(self, prompts):
        ids = torch.tensor(prompts, dtype=torch.long)
        t = time.perf_counter()
        out = self.generate(ids)
        s = time.perf_counter() - t
        return s, out[:, ids.shape[1]:].tolist()

    def diagnose(self, prompts):
        """Untimed: the smallest best-to-second logit gap over all steps, and
        how often the raw argmax was the EOS id that min_new_tokens masks
        (pcc and this file's onnxruntime loop do not mask it)."""
        ids = torch.tensor(prompts, dtype=torch.long)
        out = self.generate(ids, output_logits=True, return_dict_in_generate=True)
        logits = torch.stack(out.logits, 1)             # [batch, steps, vocab]
        top2 = logits.topk(2, -1).values
        eos = self.model.config.eos_token_id
        eos_hits = int((logits.argmax(-1) == eos).sum()) if eos is not None else 0
        return float((top2[..., 0] - top2[..., 1]).min()), eos_hits


class ORT:
    name = "onnxruntime"

    def __init__(self, path, new, threads, label):
        import onnxruntime as ort
        self.label = label
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        self.ort = ort
        self.new = new
        self.inputs = {i.name: i for i in self.sess.get_inputs()}
        self.past = [n for n in self.inputs if n.startswith("past_key_values.")]
        # past_key_values.L.key -> present.L.key
        self.present = [n.replace("past_key_values.", "present.") for n in self.past]
        self.outputs = ["logits"] + self.present

    def run(self, prompts):
        ort = self.ort
        ids = np.asarray(prompts, dtype=np.int64)
        batch, plen = ids.shape
        t = time.perf_counter()
        past = {}
        for n in self.past:                      # [batch, heads, 0, head dim]
            _, heads, _, dim = self.inputs[n].shape
            past[n] = ort.OrtValue.ortvalue_from_numpy(
                np.zeros((batch, heads, 0, dim), np.float32))
        pos = np.arange(plen, dtype=np.int64)[None].repeat(batch, 0)
        tokens = []
        for step in range(self.new):
            total = plen + step                  # positions seen after this run
            # step 0: the prompt, past empty; then the last token alone, at
            # position total - 1, attending to all total positions
            io = self.sess.io_binding()
            io.bind_cpu_input("input_ids", ids)
            if "attention_mask" in self.inputs:
                io.bind_cpu_input("attention_mask", np.ones((batch, total), np.int64))
            if "position_ids" in self.inputs:
                io.bind_cpu_input("position_ids", pos)
            for n in self.past:
                io.bind_ortvalue_input(n, past[n])
            for n in self.outputs:
                io.bind_output(n)
            self.sess.run_with_iobinding(io)
            outs = io.get_outputs()
            nxt = outs[0].numpy()[:, -1].argmax(-1)   # greedy, no EOS masking
            tokens.append(nxt)
            past = dict(zip(self.past, outs[1:]))
            ids = nxt[:, None].astype(np.int64)
            pos = np.full((batch, 1), total, np.int64)
        s = time.perf_counter() - t
        return s, np.stack(tokens, 1).tolist()


class CT2:
    name = "ctranslate2"
    label = "ctranslate2 (float32)"

    def __init__(self, path, new, threads):
        import ctranslate2
        self.gen = ctranslate2.Generator(path, device="cpu", compute_type="float32",
                                         inter_threads=1, intra_threads=threads)
        self.new = new

    def run(self, prompts):
        toks = [[str(t) for t in p] for p in prompts]
        t = time.perf_counter()
        res = self.gen.generate_batch(toks, max_length=self.new, min_length=self.new,
                                      include_prompt_in_result=False, sampling_topk=1,
                                      beam_size=1)
        s = time.perf_counter() - t
        return s, [r.sequences_ids[0] for r in res]


SUMMARY = re.compile(r"pcc: generated (\d+) tokens for (\d+) prompts in ([\d.]+) s "
                     r"\(TTFT ([\d.]+) ms, ([\d.]+) ms/token, ([\d.]+) tokens/s\)")


class PCC:
    name = "pcc"

    def __init__(self, pcc, build, new, work, label):
        self.pcc, self.build, self.new, self.work, self.label = pcc, build, new, work, label
        self.details = []

    def run(self, prompts):
        pfile = os.path.join(self.work, f"prompts-{len(prompts)}.jsonl")
        ofile = os.path.join(self.work, f"out-{len(prompts)}.jsonl")
        with open(pfile, "w") as f:
            for p in prompts:
                f.write(json.dumps({"prompt": list(map(int, p))}) + "\n")
        r = subprocess.run([self.pcc, "generate", self.build, "--prompts", pfile,
                            "--max-new-tokens", str(self.new), "-o", ofile],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"pcc generate failed:\n{r.stdout}{r.stderr}")
        last = r.stdout.strip().splitlines()[-1]
        m = SUMMARY.search(last)
        if not m:
            raise RuntimeError(f"no summary line in pcc generate's output: {last!r}")
        ntok, _, secs, ttft, ms_tok, tps = (float(x) for x in m.groups())
        # The seconds are printed with 2 decimals; tokens / (tokens/s) has more.
        s = ntok / tps if tps > 0 else secs
        self.details.append({"seconds_printed": secs, "ttft_ms": ttft,
                             "ms_per_token": ms_tok, "tokens_per_s": tps})
        with open(ofile) as f:
            tokens = [json.loads(line)["tokens"] for line in f]
        return s, tokens


# ---------------------------------------------------------------- the floor

def bandwidth(threads, nbytes=1 << 30, reps=5):
    """STREAM-copy bandwidth (bytes read + written per second) of numpy
    copying nbytes of float32, in 1 and in `threads` threads: best of reps."""
    src = np.ones(nbytes // 4, np.float32)
    dst = np.zeros_like(src)
    result = {}
    for k in sorted({1, threads}):
        parts = np.array_split(np.arange(src.size), k)
        bounds = [(p[0], p[-1] + 1) for p in parts]

        def copy(b):
            np.copyto(dst[b[0]:b[1]], src[b[0]:b[1]])   # releases the GIL

        best = float("inf")
        with concurrent.futures.ThreadPoolExecutor(k) as pool:
            for _ in range(reps + 1):                  # first: warm-up
                t = time.perf_counter()
                list(pool.map(copy, bounds))
                best = min(best, time.perf_counter() - t)
        result[k] = 2 * nbytes / best
    return result


# ---------------------------------------------------------------- main

def versions(optimum_venv):
    v = {"python": platform.python_version(), "torch": torch.__version__}
    for mod in ("transformers", "onnxruntime", "ctranslate2", "numpy"):
        try:
            v[mod] = __import__(mod).__version__
        except ImportError:
            pass
    if optimum_venv:
        try:
            v["optimum (export)"] = subprocess.run(
                [os.path.join(optimum_venv, "bin", "python"), "-c",
                 "from importlib.metadata import version as v; "
                 "print(v('optimum'), v('optimum-onnx'), 'transformers', v('transformers'))"],
                capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            pass
    return v


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main():
    ap = argparse.ArgumentParser(
        description=" ".join(__doc__.split("\n\n")[0].split()),
        epilog="The module's docstring says what is measured and how.")
    ap.add_argument("--layers", type=int, default=12, help="GPT-2 layers (default 12)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(),
                    help="threads of every system (default: all cores)")
    ap.add_argument("--runs", type=int, default=3,
                    help="timed rounds after the warm-up; the best is kept (default 3)")
    ap.add_argument("--prompt-len", type=int, default=32, help="tokens per prompt (32)")
    ap.add_argument("--new-tokens", type=int, default=64, help="new tokens per prompt (64)")
    ap.add_argument("--batches", default="1,8", help="the cases' batch sizes (1,8)")
    ap.add_argument("--pcc", default=os.path.join(ROOT, "build", "bin", "pcc"),
                    help="the pcc binary (default build/bin/pcc)")
    ap.add_argument("--optimum-venv", default="/work/venv-optimum",
                    help="venv with optimum-cli (for the with-past export)")
    ap.add_argument("--work", default="/tmp/pcc-bench-generate")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--peers", default="ort,ct2,pcc",
                    help="which of ort,ct2,pcc to run (transformers always runs)")
    a = ap.parse_args()
    batches = [int(b) for b in a.batches.split(",")]
    peers = set(a.peers.split(","))
    P, T, N = a.prompt_len, a.new_tokens, a.threads
    work = os.path.join(a.work, f"gpt2-{a.layers}l")
    os.makedirs(work, exist_ok=True)
    hf_dir = os.path.join(work, "hf")

    # ---- the model and every system's copy of it (none of this is timed)
    log(f"building GPT-2 ({a.layers} layers) and saving it to {hf_dir}")
    model = build_model(a.layers)
    model.save_pretrained(hf_dir)
    n_params = sum(p.numel() for p in model.parameters())   # tied wte/lm_head once
    weight_bytes = 4 * n_params
    g = torch.Generator().manual_seed(1)
    all_prompts = torch.randint(0, model.config.vocab_size, (max(batches), P),
                                generator=g).tolist()

    runners = {"transformers": HF(model, T, N)}
    compile_s = {}
    if "ort" in peers:
        log("exporting with Optimum (text-generation-with-past)")
        ort_path = export_optimum(a.optimum_venv, hf_dir, os.path.join(work, "ort"),
                                  os.path.join(work, "optimum-export.log"))
        runners["onnxruntime"] = ORT(ort_path, T, N,
                                     "onnxruntime (Optimum with-past export)")
    if "ct2" in peers:
        log("converting for ctranslate2")
        convert_ct2(hf_dir, os.path.join(work, "ct2"))
        runners["ctranslate2"] = CT2(os.path.join(work, "ct2"), T, N)
    if "pcc" in peers:
        onnx_path = os.path.join(work, "pcc-export", "model.onnx")
        os.makedirs(os.path.dirname(onnx_path), exist_ok=True)
        log(f"exporting for pcc: {onnx_path}")
        export_for_pcc(model, onnx_path)
        # Timed builds compile: the libraries' cache is off.
        env = dict(os.environ, PCC_CACHE_DIR=os.path.join(work, "pcc-cache"),
                   PCC_CACHE_LIMIT_MB="0")
        builds = {"pcc-b1": (1, P)} if 1 in batches else {}
        builds[f"pcc-b{max(batches)}"] = (max(batches), max(batches) * P)
        for name, (mb, mt) in builds.items():
            out = os.path.join(work, name)
            cmd = [a.pcc, "compile", onnx_path, "--generate", "--max-seq", str(P + T),
                   "--max-batch", str(mb), "--max-tokens", str(mt),
                   "--threads", str(N), "-o", out]
            log(" ".join(cmd))
            t = time.perf_counter()
            run_quiet(cmd, os.path.join(work, name + ".log"), env=env)
            compile_s[name] = time.perf_counter() - t
            runners[name] = PCC(a.pcc, out, T, work,
                                f"pcc (--max-batch {mb} --max-tokens {mt})")

    log("measuring the memory bandwidth")
    bw = bandwidth(N)
    bw_best = max(bw.values())
    floor_s = weight_bytes * T / bw_best

    # ---- the cases
    results = []
    for b in batches:
        prompts = all_prompts[:b]
        # pcc's build of batch 1 serves batch 1 only; the larger build serves
        # every case it can hold (batch 1 too, for comparison).
        names = [n for n in runners if not (n.startswith("pcc-b") and int(n[5:]) < b)]
        log(f"batch {b}: warm-up")
        times = {n: [] for n in names}
        tokens = {}
        for n in names:
            _, tokens[n] = runners[n].run(prompts)
        margin, eos_hits = runners["transformers"].diagnose(prompts)
        for r in range(a.runs):
            order = names[r % len(names):] + names[:r % len(names)]
            log(f"batch {b}: round {r + 1} of {a.runs}: {', '.join(order)}")
            for n in order:
                time.sleep(0.5)          # let the last system's threads settle
                s, toks = runners[n].run(prompts)
                times[n].append(s)
                tokens[n] = toks         # every run must agree; the last is kept
        ref = tokens["transformers"]
        fastest_peer = min(min(times[n]) for n in names if not n.startswith("pcc"))
        rows = []
        for n in names:
            best = min(times[n])
            bad = [i for i, (x, y) in enumerate(zip(tokens[n], ref)) if x != y]
            rows.append({
                "runner": n, "label": runners[n].label,
                "seconds": best, "median_seconds": statistics.median(times[n]),
                "all_seconds": times[n], "tokens_per_s": b * T / best,
                "vs_fastest_peer": best / fastest_peer,
                "vs_floor": best / floor_s,
                "mismatched_prompts": len(bad), "mismatched_indices": bad,
                "tokens_generated": sum(len(t) for t in tokens[n]),
                **({"pcc_summaries": runners[n].details[-a.runs:],
                    "pcc_best_summary":
                        runners[n].details[-a.runs:][times[n].index(best)]}
                   if n.startswith("pcc") else {}),
            })
        pcc_rows = [r for r in rows if r["runner"].startswith("pcc")]
        pcc_best = min(pcc_rows, key=lambda r: r["seconds"])["runner"] if pcc_rows else None
        results.append({"batch": b, "rows": rows, "fastest_peer_seconds": fastest_peer,
                        "pcc_best_build": pcc_best,
                        "floor_seconds": floor_s, "min_logit_margin": margin,
                        "eos_argmax_steps": eos_hits})

    # ---- report
    info = {
        "model": f"GPT-2 architecture, {a.layers} layers, n_embd 768, 12 heads, "
                 f"vocab {model.config.vocab_size}, random init (torch.manual_seed(0)), float32",
        "parameters": n_params, "weight_bytes": weight_bytes,
        "prompt_len": P, "new_tokens": T, "threads": N, "timed_runs": a.runs,
        "statistic": "best (minimum) of the timed runs, taken in turns after one warm-up",
        "bandwidth_bytes_per_s": {str(k): v for k, v in bw.items()},
        "bandwidth_used": bw_best, "floor_seconds": floor_s,
        "machine": f"{cpu_name()}, {os.cpu_count()} cores",
        "versions": versions(a.optimum_venv if "ort" in peers else None),
        "pcc": a.pcc, "pcc_compile_seconds": compile_s,
        "onnxruntime_export": "Optimum (optimum-cli export onnx --task "
                              "text-generation-with-past)" if "ort" in peers else None,
        "cases": results,
    }
    print(f"GPT-2 ({a.layers} layers, {n_params / 1e6:.1f} M parameters, "
          f"{weight_bytes / 1e6:.1f} MB in float32), random weights; "
          f"prompts of {P} tokens, {T} new tokens, greedy; {N} threads each")
    print(f"machine: {info['machine']}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in info["versions"].items()))
    print(f"seconds: the best of {a.runs} runs (after one warm-up, the systems in turns), "
          "loading excluded")
    print(f"memory bandwidth (numpy copy of 1 GiB, read + write bytes): "
          + ", ".join(f"{bw[k] / 1e9:.1f} GB/s with {k} thread{'s' if k > 1 else ''}"
                      for k in sorted(bw)))
    print(f"floor: {weight_bytes / 1e6:.1f} MB x {T} steps / {bw_best / 1e9:.1f} GB/s "
          f"= {floor_s:.3f} s (every weight read once per step)")
    for case in results:
        print()
        print(f"batch {case['batch']}: {case['batch'] * T} new tokens; transformers' "
              f"smallest top-1/top-2 logit gap {case['min_logit_margin']:.2e}, "
              f"EOS the raw argmax at {case['eos_argmax_steps']} step(s)")
        print(f"  {'':44s} {'seconds':>9s} {'tokens/s':>9s} {'/ fastest peer':>14s} "
              f"{'/ floor':>8s}  tokens")
        for r in case["rows"]:
            same = ("same" if r["mismatched_prompts"] == 0 else
                    f"{r['mismatched_prompts']} of {case['batch']} prompts differ "
                    f"{r['mismatched_indices']}")
            if r["runner"] == "transformers":
                same = "(reference)"
            print(f"  {r['label']:44s} {r['seconds']:9.3f} {r['tokens_per_s']:9.1f} "
                  f"{r['vs_fastest_peer']:14.2f} {r['vs_floor']:8.2f}  {same}")
        print(f"  {'floor (weights once per step)':44s} {case['floor_seconds']:9.3f} "
              f"{case['batch'] * T / case['floor_seconds']:9.1f}")
        for r in case["rows"]:
            if "pcc_best_summary" in r:
                d = r["pcc_best_summary"]
                print(f"  {r['runner']}'s own summary of that run: TTFT {d['ttft_ms']:.1f} ms, "
                      f"{d['ms_per_token']:.2f} ms/token")
        if case["pcc_best_build"]:
            print(f"  pcc's figure for this case: {case['pcc_best_build']}, the faster "
                  "of its builds that hold the batch")
    if compile_s:
        print()
        print("pcc compile: " + ", ".join(f"{k} {v:.1f} s" for k, v in compile_s.items()))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(info, f, indent=2)
        print(f"figures written to {a.json}")


if __name__ == "__main__":
    main()
