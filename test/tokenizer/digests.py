#!/usr/bin/env python3
"""HF `tokenizers`' answers on the corpus, kept as digests, so that a
machine without `tokenizers` (CI) still checks pcc's tokenizer against it.

usage: digests.py write DATA_DIR CORPUS OUT.json [--random N]
       digests.py check TOKENIZER_CHECK DATA_DIR CORPUS DIGESTS.json

`write` (needs `tokenizers`) encodes every corpus line with each supported
tokenizer of DATA_DIR (the lines' bytes decoded with errors="replace", as
pcc does), decodes the ids, and decodes N random id lists drawn from the
tokenizer's ids alone (a seeded generator, no HF); it keeps a SHA-1 of
every 100 lines' ids, of their texts and of every 100 random lists'
texts. `check` computes the same with pcc's tokenizer (TOKENIZER_CHECK,
built from tokenizer-check.cpp) and names the first chunks that differ.
A chunk that differs is a line that differs: check_tokenizer.py, where
`tokenizers` is installed, shows it id by id.
"""
import hashlib
import json
import os
import random
import subprocess
import sys

CHUNK = 100


def digest(items):
    return hashlib.sha1(json.dumps(items, ensure_ascii=False).encode(
        "utf-8", "surrogatepass")).hexdigest()[:16]


def chunks(items):
    return [digest(items[i:i + CHUNK]) for i in range(0, len(items), CHUNK)]


def supported(data_dir):
    return sorted(f for f in os.listdir(data_dir)
                  if f.endswith(".json") and not f.startswith("unsupported-"))


def vocabulary_size(path):
    """The largest id of the vocabulary and the added tokens, plus one."""
    t = json.load(open(path))
    ids = list(t["model"]["vocab"].values()) + [
        a["id"] for a in t.get("added_tokens") or []]
    return max(ids) + 1


def random_lists(path, n, seed=1):
    rng = random.Random(seed)
    size = vocabulary_size(path)
    return [[rng.randrange(size) for _ in range(rng.randint(1, 12))]
            for _ in range(n)]


def decode_each(tok, lists):
    out = []
    for ids in lists:
        try:
            out.append(tok.decode(ids, skip_special_tokens=False))
        except BaseException:  # a Rust panic
            out.append(None)
    return out


def lines_of(corpus):
    return open(corpus, "rb").read().split(b"\n")[:-1]


def write(data_dir, corpus, out, n):
    from tokenizers import Tokenizer
    lines = [l.decode("utf-8", "replace") for l in lines_of(corpus)]
    result = {"lines": len(lines), "random": n, "chunk": CHUNK,
              "tokenizers": {}}
    for name in supported(data_dir):
        path = os.path.join(data_dir, name)
        tok = Tokenizer.from_file(path)
        ids = [e.ids for e in tok.encode_batch(lines,
                                               add_special_tokens=False)]
        texts = decode_each(tok, ids)
        rand = decode_each(tok, random_lists(path, n))
        result["tokenizers"][name] = {
            "encode": chunks(ids), "decode": chunks(texts),
            "random": chunks(rand),
            # Where HF panics (some decoders on no ids), nothing is compared.
            "panics": [i for i, t in enumerate(texts) if t is None],
            "random_panics": [i for i, t in enumerate(rand) if t is None]}
        print("%s: %d lines, %d ids, %d random lists" %
              (name, len(lines), sum(map(len, ids)), n))
    json.dump(result, open(out, "w"), indent=0)
    return 0


def run(binary, tokenizer, mode, data):
    p = subprocess.run([binary, tokenizer, mode], input=data,
                       capture_output=True)
    if p.returncode:
        sys.exit("FAIL %s %s: %s" % (os.path.basename(tokenizer), mode,
                                     p.stderr.decode(errors="replace")))
    return [json.loads(l) for l in p.stdout.decode().split("\n") if l]


def check(binary, data_dir, corpus, digests_path):
    want = json.load(open(digests_path))
    lines = lines_of(corpus)
    if len(lines) != want["lines"]:
        print("FAIL the corpus has %d lines, the digests %d (rerun write)" %
              (len(lines), want["lines"]))
        return 1
    failures = 0
    for name, expected in sorted(want["tokenizers"].items()):
        path = os.path.join(data_dir, name)
        ids = run(binary, path, "encode", b"\n".join(lines) + b"\n")
        texts = run(binary, path, "decode",
                    "".join(json.dumps(i) + "\n" for i in ids).encode())
        lists = random_lists(path, want["random"])
        rand = run(binary, path, "decode",
                   "".join(json.dumps(i) + "\n" for i in lists).encode())
        for i in expected.get("panics", []):
            texts[i] = None
        for i in expected.get("random_panics", []):
            rand[i] = None
        problems = []
        for what, got in (("encode", chunks(ids)), ("decode", chunks(texts)),
                          ("random", chunks(rand))):
            bad = [i for i, (a, b) in enumerate(zip(got, expected[what]))
                   if a != b]
            if bad or len(got) != len(expected[what]):
                problems.append("%s differs in lines %s" % (what, ", ".join(
                    "%d-%d" % (i * CHUNK, i * CHUNK + CHUNK - 1)
                    for i in bad[:3])))
        if problems:
            failures += 1
            print("FAIL %s: %s" % (name, "; ".join(problems)))
        else:
            print("ok %s: %d lines encoded and decoded, %d random id lists "
                  "decoded, as HF tokenizers" % (name, len(lines),
                                                  want["random"]))
    return 1 if failures else 0


def main(argv):
    if argv[:1] == ["write"] and len(argv) >= 4:
        n = int(argv[argv.index("--random") + 1]) if "--random" in argv \
            else 4000
        return write(argv[1], argv[2], argv[3], n)
    if argv[:1] == ["check"] and len(argv) == 5:
        return check(*argv[1:])
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
