#!/usr/bin/env python3
"""Greedy tokens under the penalties of pcc generate and pcc serve, for
models of export_generation.py: test/e2e/generate/Inputs/penalties/.

usage: python export_penalties.py [NAME,NAME,...]   (default gpt2,qwen2,mistral)

For each NAME the model of NAME-dyn.tar.gz is built again as
export_generation.py's make() builds it (same seed, same noise; this script
checks that its greedy generate() gives the archive's generate.json tokens)
and two files are written, each in generate.json's format (prompts and
max_new_tokens of the archive's generate.json) with a "sampling" object
that check_tokens.py copies into every request:

  NAME-repetition.json  tokens of transformers' generate(do_sample=False,
                        repetition_penalty=R), the first R of
                        REPETITION_PENALTIES whose steps all keep a gap of at
                        least MIN_MARGIN between the best and second-best
                        processed score and whose tokens differ from the
                        plain greedy ones for at least two prompts;
  NAME-openai.json      (where some penalties keep the margin) tokens of a greedy loop (the whole sequence each
                        step, no cache) that subtracts OpenAI's presence
                        penalty P and frequency penalty F x count from the
                        logits of the tokens generated so far, as vLLM does
                        (transformers has no such processor), chosen as R;
  gpt2-config.json      (GPT-2 only) "generation_config", a Hugging Face
                        generation config (greedy, the repetition penalty
                        of gpt2-repetition.json, max_new_tokens 12,
                        min_new_tokens 3, two end-of-sequence ids: one that
                        min_new_tokens holds back, one that ends a request),
                        and the tokens and "finish_reasons" of transformers'
                        generate(generation_config=...).

Needs what export_generation.py needs (PyTorch, transformers, onnx). Seeds
are fixed and PyTorch runs on one thread: the same packages give the same
files.
"""
import json
import os
import sys
import tarfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import export_generation as eg  # noqa: E402

OUT = os.path.join(HERE, "..", "..", "e2e", "generate", "Inputs", "penalties")
REPETITION_PENALTIES = (1.5, 2.0, 1.3, 3.0)
OPENAI_PENALTIES = ((0.5, 0.75), (1.0, 0.5), (0.3, 1.5), (1.5, 1.5))
MIN_MARGIN = eg.MIN_MARGIN
MIN_CHANGED = 2


def reference(name):
    with tarfile.open(os.path.join(HERE, name + "-dyn.tar.gz")) as t:
        return json.load(t.extractfile(name + "-dyn/generate.json"))


def model_of(name, ref):
    model = eg.build(name)
    for p, want in zip(ref["prompts"], ref["tokens"]):
        got, _ = eg.greedy(model, p)
        assert got == want, (name, "not the archive's model", got, want)
    return model


def margin_of(scores):
    top = torch.topk(scores, 2).values
    return (top[0] - top[1]).item()


def repetition(model, prompts, penalty):
    tokens, margin = [], float("inf")
    for p in prompts:
        x = torch.tensor([p])
        with torch.no_grad():
            out = model.generate(x, attention_mask=torch.ones_like(x),
                                 max_new_tokens=eg.MAX_NEW, min_new_tokens=eg.MAX_NEW,
                                 do_sample=False, use_cache=True, pad_token_id=0,
                                 eos_token_id=None, repetition_penalty=penalty,
                                 output_scores=True, return_dict_in_generate=True)
        tokens.append(out.sequences[0, len(p):].tolist())
        margin = min([margin] + [margin_of(s[0]) for s in out.scores])
    return tokens, margin


def openai(model, prompts, presence, frequency):
    tokens, margin = [], float("inf")
    for p in prompts:
        ids, new = list(p), []
        for _ in range(eg.MAX_NEW):
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([ids]), use_cache=False).logits[0, -1]
            for t in set(new):
                logits[t] -= frequency * new.count(t) + presence
            margin = min(margin, margin_of(logits))
            new.append(int(logits.argmax()))
            ids.append(new[-1])
        tokens.append(new)
    return tokens, margin


def with_config(model, prompts, config):
    """transformers' generate() under a generation config: its tokens, why
    each ended, and the smallest gap of the processed scores."""
    from transformers import GenerationConfig
    tokens, reasons, margin = [], [], float("inf")
    for p in prompts:
        x = torch.tensor([p])
        with torch.no_grad():
            gc = GenerationConfig(**config, use_cache=True, pad_token_id=0,
                                  output_scores=True, return_dict_in_generate=True)
            out = model.generate(x, attention_mask=torch.ones_like(x),
                                 generation_config=gc)
        new = out.sequences[0, len(p):].tolist()
        tokens.append(new)
        reasons.append("stop" if new[-1] in config["eos_token_id"] else "length")
        margin = min([margin] + [margin_of(s[0]) for s in out.scores])
    return tokens, reasons, margin


def config_reference(model, ref, penalized):
    """A generation config whose end-of-sequence ids both end a request and
    are held back by min_new_tokens: eos_token_id [early, late], early among
    the first MIN_NEW of some prompt's tokens under the repetition penalty,
    late among another's later tokens; the first pair (in the order of the
    prompts and positions) for which a request stops, min_new_tokens
    changes some request's tokens, and every step keeps MIN_MARGIN."""
    MIN_NEW = 3
    base = {"do_sample": False, "repetition_penalty": penalized["sampling"]["repetition_penalty"],
            "max_new_tokens": ref["max_new_tokens"], "min_new_tokens": MIN_NEW}
    toks = penalized["tokens"]
    for i, early_of in enumerate(toks):
        for early in early_of[:MIN_NEW]:
            for j, late_of in enumerate(toks):
                for late in late_of[MIN_NEW + 2:]:
                    if j == i or late == early or late in late_of[:MIN_NEW + 2]:
                        continue
                    config = dict(base, eos_token_id=[early, late])
                    tokens, reasons, margin = with_config(model, ref["prompts"], config)
                    unheld, _, _ = with_config(model, ref["prompts"], dict(config, min_new_tokens=0))
                    if ("stop" in reasons and tokens != [t[:len(u)] for t, u in zip(tokens, unheld)]
                            and margin >= MIN_MARGIN):
                        return config, tokens, reasons, margin
    return None


def write(ref, tokens, margin, sampling, path, extra=None):
    data = {"max_new_tokens": ref["max_new_tokens"], "prompts": ref["prompts"],
            "tokens": tokens, "sampling": sampling, "min_margin": margin}
    data.update(extra or {})
    with open(path, "w") as f:
        json.dump(data, f)
        f.write("\n")
    print(os.path.basename(path), sampling, "min margin %.3g" % margin, flush=True)


def changed(tokens, ref):
    return sum(a != b for a, b in zip(tokens, ref["tokens"]))


def main(argv):
    torch.set_num_threads(1)
    names = argv[0].split(",") if argv else ["gpt2", "qwen2", "mistral"]
    os.makedirs(OUT, exist_ok=True)
    for name in names:
        ref = reference(name)
        model = model_of(name, ref)
        for r in REPETITION_PENALTIES:
            tokens, margin = repetition(model, ref["prompts"], r)
            if margin >= MIN_MARGIN and changed(tokens, ref) >= MIN_CHANGED:
                penalized = {"tokens": tokens, "sampling": {"repetition_penalty": r}}
                write(ref, tokens, margin, penalized["sampling"],
                      os.path.join(OUT, name + "-repetition.json"))
                break
        else:
            raise SystemExit(name + ": no repetition penalty with a clear margin")
        for presence, frequency in OPENAI_PENALTIES:
            tokens, margin = openai(model, ref["prompts"], presence, frequency)
            if margin >= MIN_MARGIN and changed(tokens, ref) >= MIN_CHANGED:
                write(ref, tokens, margin,
                      {"presence_penalty": presence, "frequency_penalty": frequency},
                      os.path.join(OUT, name + "-openai.json"))
                break
        else:  # the gaps of some models' greedy steps are too narrow
            print(name + ": no OpenAI penalties with a clear margin; none written")
        if name == "gpt2":
            found = config_reference(model, ref, penalized)
            if not found:
                raise SystemExit(name + ": no generation config reference")
            config, tokens, reasons, margin = found
            write(ref, tokens, margin, {}, os.path.join(OUT, name + "-config.json"),
                  {"generation_config": config, "finish_reasons": reasons})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
