#!/usr/bin/env python3
"""pcc serve under an open-loop load, against pcc generate on the same
requests.

usage: python3 bench/serve.py (--build DIR | --onnx MODEL.onnx) [options]

With --onnx it first compiles MODEL.onnx with pcc compile --generate
(--max-seq, --max-batch and any --compile-args) into --work. It draws
--requests requests (seeded): prompt lengths uniform in --prompt-len A:B,
output lengths uniform in --output-len A:B, prompt ids uniform over the
vocabulary, no stop token, so that every request generates exactly its
output length. Then, in one run:
  1. offline: pcc generate on every request at once (its tokens/s line);
  2. served, saturated: pcc serve, every request sent at once, not
     streamed: output tokens / wall time, and its ratio to 1;
  3. served, open loop: Poisson arrivals at each of --rates requests/s,
     streamed: throughput, TTFT and inter-token latency p50 and p99
     (measured by the client, from each request's send).
The client is this process's threads; on a small machine they take CPU
time from the server, which the saturated run keeps to one thread each
waiting on its answer. Prints a table and, with --json FILE, writes it.
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def percentile(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100
    i = int(k)
    return xs[i] + (xs[min(i + 1, len(xs) - 1)] - xs[i]) * (k - i)


def span(text):
    a, b = text.split(":")
    return int(a), int(b)


class Server:
    def __init__(self, pcc, build, extra):
        self.proc = subprocess.Popen(
            [pcc, "serve", build, "--port", "0", "--max-queue", "100000"] +
            extra, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True)
        for line in self.proc.stdout:
            if "http://" in line:
                self.base = "http://" + line.split("http://")[1].split()[0]
                break
        else:
            sys.exit("pcc serve did not start")
        threading.Thread(target=lambda: [None for _ in self.proc.stdout],
                         daemon=True).start()

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=15)


def post(base, body, stream):
    req = urllib.request.Request(base + "/v1/completions",
                                 data=json.dumps(body).encode(),
                                 method="POST")
    req.add_header("Content-Type", "application/json")
    times, tokens = [], 0
    with urllib.request.urlopen(req, timeout=3600) as r:
        if not stream:
            answer = json.loads(r.read())
            return [time.perf_counter()], len(answer["choices"][0]["token_ids"])
        for line in r:
            line = line.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            n = len(json.loads(line[6:])["choices"][0]["token_ids"])
            if n:
                now = time.perf_counter()
                times += [now] * n
                tokens += n
    return times, tokens


def load(base, requests, rate, stream, seed):
    """Sends the requests at Poisson arrivals of `rate` per second (inf: all
    at once); returns per-request (send time, token times) and the span."""
    rng = random.Random(seed)
    at, t = [], 0.0
    for _ in requests:
        at.append(t)
        if rate != float("inf"):
            t += rng.expovariate(rate)
    results = [None] * len(requests)
    start = time.perf_counter()

    def one(i):
        delay = start + at[i] - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        sent = time.perf_counter()
        r = requests[i]
        times, n = post(base, {"prompt": r["prompt"],
                               "max_tokens": r["max_new_tokens"],
                               "temperature": 0, "stream": stream,
                               "return_token_ids": True}, stream)
        if n != r["max_new_tokens"]:
            raise SystemExit("request %d: %d tokens, asked %d" %
                             (i, n, r["max_new_tokens"]))
        results[i] = (sent, times)

    threads = [threading.Thread(target=one, args=(i,))
               for i in range(len(requests))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    end = max(r[1][-1] for r in results)
    return results, end - start


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build")
    ap.add_argument("--onnx")
    ap.add_argument("--pcc", default=os.environ.get(
        "PCC", os.path.join(ROOT, "build", "bin", "pcc")))
    ap.add_argument("--work", default="/tmp/pcc-bench-serve")
    ap.add_argument("--max-seq", type=int, default=96)
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--compile-args", default="")
    ap.add_argument("--requests", type=int, default=48)
    ap.add_argument("--prompt-len", type=span, default=(8, 48))
    ap.add_argument("--output-len", type=span, default=(16, 48))
    ap.add_argument("--rates", default="1,2,4")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vocab", type=int, default=256,
                    help="prompt ids are drawn below it (default 256)")
    ap.add_argument("--json")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)

    build = args.build
    if not build:
        if not args.onnx:
            ap.error("give --build DIR or --onnx MODEL.onnx")
        build = os.path.join(args.work, "build")
        subprocess.run([args.pcc, "compile", args.onnx, "-o", build,
                        "--generate", "--max-seq", str(args.max_seq),
                        "--max-batch", str(args.max_batch)] +
                       args.compile_args.split(), check=True,
                       stdout=subprocess.DEVNULL)
    report = json.load(open(os.path.join(build, "report.json")))
    max_seq = report["generation"]["max_seq"]
    vocab = args.vocab

    rng = random.Random(args.seed)
    requests = []
    for _ in range(args.requests):
        p = rng.randint(*args.prompt_len)
        o = min(rng.randint(*args.output_len), max_seq - p)
        requests.append({"prompt": [rng.randrange(vocab) for _ in range(p)],
                         "max_new_tokens": o})
    total = sum(r["max_new_tokens"] for r in requests)
    prompts = os.path.join(args.work, "requests.jsonl")
    with open(prompts, "w") as f:
        for r in requests:
            f.write(json.dumps(r) + "\n")

    # 1. Offline.
    start = time.perf_counter()
    out = subprocess.run([args.pcc, "generate", build, "--prompts", prompts,
                          "-o", os.path.join(args.work, "offline.jsonl")],
                         check=True, capture_output=True, text=True).stdout
    offline_wall = time.perf_counter() - start
    m = re.search(r"generated (\d+) tokens .* in ([0-9.]+) s", out)
    offline = int(m.group(1)) / float(m.group(2))
    offline_tokens = [json.loads(l)["tokens"] for l in
                      open(os.path.join(args.work, "offline.jsonl"))]

    server = Server(args.pcc, build, [])
    rows = []
    try:
        # 2. Saturated, not streamed; its tokens against the offline run's.
        results, seconds = load(server.base, requests, float("inf"), False,
                                args.seed)
        saturated = total / seconds
        rows.append({"rate": "all at once", "stream": False,
                     "tokens_per_s": saturated})
        # 3. Open loop, streamed.
        for rate in [float(x) for x in args.rates.split(",")]:
            results, seconds = load(server.base, requests, rate, True,
                                    args.seed)
            ttft = [times[0] - sent for sent, times in results]
            itl = [b - a for _, times in results
                   for a, b in zip(times, times[1:]) if b > a]
            rows.append({"rate": rate, "stream": True,
                         "tokens_per_s": total / seconds,
                         "ttft_p50_ms": 1e3 * percentile(ttft, 50),
                         "ttft_p99_ms": 1e3 * percentile(ttft, 99),
                         "itl_p50_ms": 1e3 * percentile(itl, 50),
                         "itl_p99_ms": 1e3 * percentile(itl, 99)})
    finally:
        server.stop()

    print("requests: %d, prompts %d-%d tokens, outputs %d-%d (%d tokens in "
          "all), %s" % (args.requests, *args.prompt_len, *args.output_len,
                        total, build))
    print("offline (pcc generate): %.1f tokens/s (wall %.2f s with loading)"
          % (offline, offline_wall))
    print("| load | tokens/s | x offline | TTFT p50 | TTFT p99 | ITL p50 | "
          "ITL p99 |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        rate = r["rate"] if isinstance(r["rate"], str) else \
            "%g req/s, streamed" % r["rate"]
        lat = ("| %.0f ms | %.0f ms | %.1f ms | %.1f ms |" %
               (r["ttft_p50_ms"], r["ttft_p99_ms"], r["itl_p50_ms"],
                r["itl_p99_ms"]) if r["stream"] else "| | | | |")
        print("| %s | %.1f | %.2f %s" % (rate, r["tokens_per_s"],
                                         r["tokens_per_s"] / offline, lat))
    ok = rows[0]["tokens_per_s"] >= 0.9 * offline
    print("saturated served throughput %.2f x offline: %s (goal >= 0.9)" %
          (rows[0]["tokens_per_s"] / offline, "ok" if ok else "FAIL"))
    if args.json:
        json.dump({"offline_tokens_per_s": offline, "rows": rows,
                   "requests": args.requests, "build": build}, open(
                       args.json, "w"), indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
