#!/usr/bin/env python3
"""Trains the small tokenizer.json files that pcc's tokenizer is checked on.

usage: train_tokenizers.py OUT_DIR [--seed S]

Each file imitates the pipeline of a model family, with a BPE of a few
thousand tokens so that many merges and, where enabled, byte fallback are
exercised on the corpus of make_corpus.py:
  gpt2.json              ByteLevel pre-tokenizer with GPT-2's regex and
                         ByteLevel decoder; merges in the legacy "a b" form
  llama3.json            Split(Llama 3 regex) + ByteLevel(use_regex=false),
                         ignore_merges, no normalizer
  qwen2.json             NFC, Split(Qwen2 regex) + ByteLevel
  llama2.json            byte_fallback BPE with <unk>, normalizer
                         Prepend("▁") + Replace(" ", "▁"), no pre-tokenizer,
                         decoder Replace + ByteFallback + Fuse + Strip
  metaspace-first.json   Metaspace pre-tokenizer and decoder, prepend
                         scheme "first", byte_fallback BPE
  metaspace-always.json  the same with prepend scheme "always", split false
and, to cover the other options pcc supports:
  roberta.json           NFKC, ByteLevel with add_prefix_space, merges with
                         a "#version" header line
  split-behaviors.json   NFD + Lowercase + regex Replace + Strip, Splits
                         with every behavior and invert, Digits, BPE with
                         unk_token and no byte fallback, decoders after Fuse
  metaspace-never.json   NFKD, Digits + Metaspace(prepend_scheme "never"),
                         fused unknown tokens, per-token Strip
  no-decoder.json        the same without a decoder (HF joins tokens with
                         spaces)
and, for refusal tests, files with pieces pcc does not support:
  unsupported-wordpiece.json  (a WordPiece model, BertPreTokenizer)
  unsupported-unigram.json    (a Unigram model)
  unsupported-pretok.json     (BPE behind a BertPreTokenizer)
  unsupported-dropout.json    (BPE with dropout)
Training is deterministic for a given seed; no network access is needed.
"""
import argparse
import json
import os
import sys

from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models,
                        normalizers, pre_tokenizers, trainers)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_corpus  # noqa: E402

GPT2_PATTERN = (r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+"
                r"|\s+(?!\S)|\s+")
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+"
                  r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
                  r"|\s+(?!\S)|\s+")
QWEN2_PATTERN = LLAMA3_PATTERN.replace(r"\p{N}{1,3}", r"\p{N}")

BYTE_TOKENS = ["<0x%02X>" % b for b in range(256)]


def train(tok, text_file, vocab_size, special, **kw):
    trainer = trainers.BpeTrainer(vocab_size=vocab_size,
                                  special_tokens=special, show_progress=False,
                                  **kw)
    tok.train([text_file], trainer)
    return tok


def add_extra_tokens(tok, extra):
    """Adds tokens with the options HF honours when splitting text."""
    for t in extra:
        if t.special:
            tok.add_special_tokens([t])
        else:
            tok.add_tokens([t])


def with_byte_vocab(tok, front):
    """The tokenizer's JSON with the model vocabulary renumbered as Llama's:
    `front` (e.g. <unk> <s> </s>), then <0x00>..<0xFF>, then the rest, and
    the added tokens' ids updated to match."""
    js = json.loads(tok.to_str())
    vocab = js["model"]["vocab"]
    order = front + BYTE_TOKENS + [
        t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])
        if t not in front and t not in BYTE_TOKENS]
    js["model"]["vocab"] = {t: i for i, t in enumerate(order)}
    ids = js["model"]["vocab"]
    next_id = len(order)
    for a in js["added_tokens"]:
        if a["content"] in ids:
            a["id"] = ids[a["content"]]
        else:
            a["id"] = next_id
            next_id += 1
    js["added_tokens"].sort(key=lambda a: a["id"])
    return js


def save(js_or_tok, path, legacy_merges=False):
    js = js_or_tok if isinstance(js_or_tok, dict) else json.loads(
        js_or_tok.to_str())
    if legacy_merges:
        js["model"]["merges"] = [" ".join(m) for m in js["model"]["merges"]]
    text = json.dumps(js, ensure_ascii=False, separators=(",", ":"))
    # Round-trip through HF so that a file it cannot load is never written.
    Tokenizer.from_str(text)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"train_tokenizers: {os.path.basename(path)} "
          f"({os.path.getsize(path) // 1024} KB)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    text_file = os.path.join(args.out, "train.txt")
    with open(text_file, "w", encoding="utf-8") as f:
        f.write(make_corpus.training_text(20000, args.seed))

    byte_alphabet = pre_tokenizers.ByteLevel.alphabet()

    # (a) GPT-2.
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    train(tok, text_file, 3000, ["<|endoftext|>"],
          initial_alphabet=byte_alphabet)
    add_extra_tokens(tok, [
        AddedToken("<mask>", lstrip=True, rstrip=True, special=False,
                   normalized=False),
        AddedToken("<code>", single_word=True, special=False),
        AddedToken("<pad>", special=True)])
    save(tok, os.path.join(args.out, "gpt2.json"), legacy_merges=True)

    # (b) Llama 3 and Qwen2: a regex Split, then bytes without the regex.
    for name, pattern, norm, ignore in [
            ("llama3", LLAMA3_PATTERN, None, True),
            ("qwen2", QWEN2_PATTERN, normalizers.NFC(), False)]:
        tok = Tokenizer(models.BPE(ignore_merges=ignore))
        if norm is not None:
            tok.normalizer = norm
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(pattern), behavior="isolated",
                                 invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        tok.decoder = decoders.ByteLevel()
        special = (["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
                   if name == "llama3" else
                   ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
        train(tok, text_file, 3000, special, initial_alphabet=byte_alphabet)
        add_extra_tokens(tok, [
            # Matched on the normalized text: NFD content, NFC'd by Qwen2.
            AddedToken("Cafe\u0301", special=False, normalized=True),
            AddedToken("<mask>", lstrip=True, special=False, normalized=True),
            AddedToken("<|endoftext|>", special=True)])
        save(tok, os.path.join(args.out, name + ".json"))

    # (c) Llama 2 / Mistral, the newer form without a pre-tokenizer. It is
    # trained with a Metaspace pre-tokenizer so that merges stay in words.
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True,
                               fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁",
                                                 prepend_scheme="first")
    train(tok, text_file, 2200, ["<unk>", "<s>", "</s>"], limit_alphabet=120)
    tok.pre_tokenizer = None
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"),
                                           normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([
        decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
        decoders.Strip(content=" ", left=1, right=0)])
    add_extra_tokens(tok, [
        AddedToken("[MASK]", single_word=True, lstrip=True, special=False,
                   normalized=True),
        AddedToken("<pad>", special=True, normalized=False)])
    save(with_byte_vocab(tok, ["<unk>", "<s>", "</s>"]),
         os.path.join(args.out, "llama2.json"))

    # (d) The older Metaspace form, with both prepend schemes.
    for name, scheme, split in [("metaspace-first", "first", True),
                                ("metaspace-always", "always", False)]:
        tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
        tok.pre_tokenizer = pre_tokenizers.Metaspace(
            replacement="▁", prepend_scheme=scheme, split=True)
        train(tok, text_file, 2000, ["<unk>", "<s>", "</s>"],
              limit_alphabet=100)
        tok.pre_tokenizer = pre_tokenizers.Metaspace(
            replacement="▁", prepend_scheme=scheme, split=split)
        tok.decoder = decoders.Sequence([
            decoders.ByteFallback(),
            decoders.Metaspace(replacement="▁", prepend_scheme=scheme,
                               split=split)])
        add_extra_tokens(tok, [AddedToken("<mask>", rstrip=True,
                                          special=True, normalized=False)])
        save(with_byte_vocab(tok, ["<unk>", "<s>", "</s>"]),
             os.path.join(args.out, name + ".json"))

    # (e) RoBERTa: the prefix space, and merges.txt's header kept.
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    train(tok, text_file, 1500, ["<s>", "</s>"],
          initial_alphabet=byte_alphabet)
    add_extra_tokens(tok, [AddedToken("<mask>", lstrip=True, special=True)])
    js = json.loads(tok.to_str())
    js["model"]["merges"] = ["#version: 0.2"] + [
        " ".join(m) for m in js["model"]["merges"]]
    save(js, os.path.join(args.out, "roberta.json"))

    # (f) Every Split behavior, and decoders that see the fused text.
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=False))
    tok.normalizer = normalizers.Sequence([
        normalizers.NFD(), normalizers.Lowercase(),
        normalizers.Replace(Regex(r"\s{2,}"), " "),
        normalizers.Strip(left=True, right=True)])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"[,.;:!?]+"), "merged_with_previous"),
        pre_tokenizers.Split("-", "merged_with_next"),
        pre_tokenizers.Split(Regex(r"\s+"), "removed"),
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.Split(Regex(r"[aeiou]+"), "contiguous", invert=True),
        pre_tokenizers.Split(Regex(r"\p{P}"), "isolated")])
    tok.decoder = decoders.Sequence([
        decoders.Replace("e", "E"), decoders.Fuse(),
        decoders.Replace("th", "TH"),
        decoders.Strip(content=" ", left=2, right=2),
        decoders.Replace(Regex(r"a+"), "A")])
    train(tok, text_file, 1200, ["<unk>", "<s>"], limit_alphabet=80)
    save(tok, os.path.join(args.out, "split-behaviors.json"))

    # (g) Metaspace without a prepended space, unknown tokens fused.
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True))
    tok.normalizer = normalizers.NFKD()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=False),
        pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never")])
    tok.decoder = decoders.Sequence([
        # Not left and right: HF's Strip panics on a token it strips from
        # both ends past each other.
        decoders.Strip(content="▁", left=0, right=1),
        decoders.Metaspace(replacement="▁", prepend_scheme="never")])
    train(tok, text_file, 1200, ["<unk>", "</s>"], limit_alphabet=80)
    save(tok, os.path.join(args.out, "metaspace-never.json"))
    js = json.loads(tok.to_str())
    js["decoder"] = None
    save(js, os.path.join(args.out, "no-decoder.json"))

    # Unsupported pieces, each refused in one line.
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer()
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.train([text_file], trainers.WordPieceTrainer(
        vocab_size=400, special_tokens=["[UNK]", "[CLS]"],
        show_progress=False))
    save(tok, os.path.join(args.out, "unsupported-wordpiece.json"))

    tok = Tokenizer(models.Unigram(
        [("<unk>", 0.0)] + [(c, -1.0 - i / 10) for i, c in enumerate(
            "▁abcdefghijklmnopqrstuvwxyz")] + [("▁the", -1.5)], 0, False))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    save(tok, os.path.join(args.out, "unsupported-unigram.json"))

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    train(tok, text_file, 300, [])
    save(tok, os.path.join(args.out, "unsupported-pretok.json"))
    js = json.loads(tok.to_str())
    js["pre_tokenizer"] = None
    js["model"]["dropout"] = 0.1
    save(js, os.path.join(args.out, "unsupported-dropout.json"))


if __name__ == "__main__":
    main()
