#!/usr/bin/env python3
"""Checks pcc's tokenizer against Hugging Face `tokenizers`, id for id.

usage: check_tokenizer.py TOKENIZER_CHECK DATA_DIR CORPUS
                          [--random N] [--seed S] [--show K]

TOKENIZER_CHECK is the binary built from tokenizer-check.cpp, DATA_DIR holds
the tokenizer.json files of train_tokenizers.py and CORPUS the lines of
make_corpus.py. For every supported tokenizer (the files not named
unsupported-*) it compares, with HF's encode(text, add_special_tokens=False)
and decode(ids, skip_special_tokens=False):
  encode  the ids of every corpus line; HF takes str, so the line's bytes are
          decoded with errors="replace" first, as pcc does itself; and of
          texts of several lines joined by \n, \r\n or \n\n (the corpus
          lines hold no \n);
  decode  the text of the ids of every line, and of N random id lists biased
          to byte-fallback tokens, byte-level tokens of non-ASCII bytes (so
          that invalid UTF-8 is decoded) and added tokens;
  stream  the same lists through pcc's Detokenizer, one id at a time.
Each unsupported-*.json must be refused with one line naming the file and
the unsupported piece. Prints a line per tokenizer and the first K
mismatches of each check; exits 1 on any mismatch.
"""
import argparse
import contextlib
import json
import os
import random
import subprocess
import sys

from tokenizers import Tokenizer

# The piece each unsupported file must be refused for.
REFUSALS = {
    "unsupported-wordpiece.json": '"WordPiece"',
    "unsupported-unigram.json": '"Unigram"',
    "unsupported-pretok.json": '"BertPreTokenizer"',
    "unsupported-dropout.json": "dropout",
}


def bytes_to_unicode():
    """GPT-2's byte -> character table."""
    bs = (list(range(ord("!"), ord("~") + 1)) +
          list(range(ord("¡"), ord("¬") + 1)) +
          list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


@contextlib.contextmanager
def quiet_stderr():
    """Silences fd 2, where Rust prints a panic and its backtrace."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def run(binary, tokenizer, mode, data):
    p = subprocess.run([binary, tokenizer, mode], input=data,
                       capture_output=True)
    if p.returncode != 0:
        sys.exit(f"check_tokenizer: {binary} {mode} failed: "
                 f"{p.stderr.decode(errors='replace').strip()}")
    # Not splitlines(): decoded text may hold U+2028, U+0085 and the like.
    out = p.stdout.decode().split("\n")
    return [json.loads(l) for l in out[:-1]]


def random_id_lists(tok, n, rng):
    vocab = tok.get_vocab(with_added_tokens=True)
    ids = sorted(set(vocab.values()))
    high_bytes = set(c for b, c in bytes_to_unicode().items() if b >= 0x80)
    byte_tokens = [i for t, i in vocab.items()
                   if len(t) == 6 and t.startswith("<0x")]
    byte_level = [i for t, i in vocab.items()
                  if any(ch in high_bytes for ch in t)]
    added = sorted(tok.get_added_tokens_decoder())
    pools = [ids, byte_tokens or ids, byte_level or ids, added or ids]
    lists = []
    for _ in range(n):
        length = rng.choice([1, 1, 2, 3, 5, 8, 13, 30])
        lists.append([rng.choice(rng.choices(pools, [4, 3, 3, 1])[0])
                      for _ in range(length)])
    return lists


def compare(what, expected, actual, show, describe):
    bad = [i for i, (e, a) in enumerate(zip(expected, actual)) if e != a]
    if len(expected) != len(actual):
        print(f"  {what}: {len(actual)} results for {len(expected)} inputs")
        return 1
    for i in bad[:show]:
        print(f"  {what} mismatch #{i}: {describe(i)}\n"
              f"    hf:  {expected[i]!r}\n    pcc: {actual[i]!r}")
    return len(bad)


def check_supported(args, path, lines, rng):
    tok = Tokenizer.from_file(path)
    name = os.path.basename(path)
    texts = [l.decode("utf-8", "replace") for l in lines]
    hf_ids = [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]
    pcc_ids = run(args.binary, path, "encode", b"".join(l + b"\n"
                                                         for l in lines))
    enc_bad = compare("encode", hf_ids, pcc_ids, args.show,
                      lambda i: f"line {i + 1} {texts[i]!r}")

    # Multi-line texts, which the line-based corpus cannot hold.
    para = []
    for i in range(0, len(lines), 4):
        sep = [b"\n", b"\n", b"\r\n", b"\n\n", b" \n"][(i // 4) % 5]
        para.append(sep.join(lines[i:i + 1 + (i // 4) % 6]))
    para_texts = [p.decode("utf-8", "replace") for p in para]
    hf_para = [e.ids for e in tok.encode_batch(para_texts,
                                               add_special_tokens=False)]
    pcc_para = run(args.binary, path, "encode-hex",
                   b"".join(p.hex().encode() + b"\n" for p in para))
    enc_bad += compare("encode (multi-line)", hf_para, pcc_para, args.show,
                       lambda i: f"text {i + 1} {para_texts[i]!r}")

    lists = hf_ids + hf_para + random_id_lists(tok, args.random, rng)
    listed = len(lists)
    try:
        with quiet_stderr():
            hf_text = tok.decode_batch(lists, skip_special_tokens=False)
    except BaseException:
        # Some decoders panic on some inputs (e.g. a Strip of both ends of a
        # token too short for it); pcc cannot match a panic: skip those.
        hf_text, kept = [], []
        for l in lists:
            try:
                with quiet_stderr():
                    hf_text.append(tok.decode(l, skip_special_tokens=False))
                kept.append(l)
            except BaseException:
                pass
        print(f"  {name}: HF panics decoding {len(lists) - len(kept)} "
              f"id lists; they are skipped")
        lists = kept
    data = "".join(json.dumps(l) + "\n" for l in lists).encode()
    dec_bad = compare("decode", hf_text,
                      run(args.binary, path, "decode", data), args.show,
                      lambda i: f"ids {lists[i]}")
    str_bad = compare("stream", hf_text,
                      run(args.binary, path, "stream", data), args.show,
                      lambda i: f"ids {lists[i]}")
    tokens = sum(len(i) for i in hf_ids + hf_para)
    skipped = (f", {listed - len(lists)} skipped" if listed != len(lists)
               else "")
    print(f"{name}: encode {len(lines)} lines + {len(para)} multi-line "
          f"texts ({tokens} ids), "
          f"{enc_bad} mismatches; decode {len(lists)} id lists "
          f"({len(hf_ids) + len(hf_para)} encoded + {args.random} random"
          f"{skipped}), "
          f"{dec_bad} mismatches; stream {len(lists)}, {str_bad} mismatches")
    return enc_bad + dec_bad + str_bad


def check_refused(args, path):
    name = os.path.basename(path)
    p = subprocess.run([args.binary, path, "encode"], input=b"",
                       capture_output=True)
    err = p.stderr.decode(errors="replace")
    want = REFUSALS.get(name, "")
    ok = (p.returncode == 1 and err.count("\n") == 1 and path in err and
          want in err and "not supported" in err)
    print(f"{name}: {'refused' if ok else 'NOT REFUSED AS EXPECTED'}: "
          f"{err.strip()}")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("data")
    ap.add_argument("corpus")
    ap.add_argument("--random", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--show", type=int, default=5)
    args = ap.parse_args()
    with open(args.corpus, "rb") as f:
        lines = f.read().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    rng = random.Random(args.seed)
    failures = 0
    for name in sorted(os.listdir(args.data)):
        if not name.endswith(".json"):
            continue
        path = os.path.join(args.data, name)
        if name.startswith("unsupported-"):
            failures += check_refused(args, path)
        else:
            failures += check_supported(args, path, lines, rng)
    print("check_tokenizer: " + ("FAILED" if failures else "all match"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
