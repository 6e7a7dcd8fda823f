"""`import pcc`: a compiled build from Python (pytest, run by ctest).

Each test compiles the build it needs with the pcc next to the module (or
$PCC_EXECUTABLE) from the repository's fixtures, and checks the session's
answers against PyTorch's: logits within 1e-4, greedy tokens equal to
transformers' generate(), SGD losses within 1e-5 relative.
"""
import json
import os
import subprocess
import tarfile

import numpy as np
import onnx
import onnx.numpy_helper
import pytest

import pcc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
MODELS = os.path.join(ROOT, "test", "models")
PCC = os.environ.get("PCC_EXECUTABLE") or pcc._BUILT_PCC


def unpack(tmp, archive):
    with tarfile.open(os.path.join(MODELS, archive)) as t:
        t.extractall(tmp)


def compile_model(model, out, *options):
    subprocess.run([PCC, "compile", model, "-o", out] + list(options),
                   check=True, stdout=subprocess.DEVNULL)
    return out


def read_pb(path):
    return onnx.numpy_helper.to_array(onnx.load_tensor(path))


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
    return str(tmp_path_factory.mktemp("pcc"))


@pytest.fixture(scope="module")
def gpt2_tiny(tmp):
    unpack(tmp, "gpt2-tiny.tar.gz")
    return os.path.join(tmp, "gpt2-tiny")


@pytest.fixture(scope="module")
def gpt2_dyn(tmp):
    unpack(tmp, os.path.join("generation", "gpt2-dyn.tar.gz"))
    return os.path.join(tmp, "gpt2-dyn")


def test_run_equals_pytorch(tmp, gpt2_tiny):
    out = compile_model(os.path.join(gpt2_tiny, "model.onnx"),
                        os.path.join(tmp, "infer"))
    ids = read_pb(os.path.join(gpt2_tiny, "ref", "input_0.pb"))
    want = read_pb(os.path.join(gpt2_tiny, "ref", "output_0.pb"))
    with pcc.Session(out) as s:
        assert s.num_ranks == 1
        name = s._session.input_names[0]
        first = s.run({name: ids})
        again = s.run({name: ids})  # the weights stay loaded
    (logits,) = first.values()
    assert logits.shape == want.shape
    np.testing.assert_allclose(logits, want, atol=1e-4, rtol=0)
    np.testing.assert_array_equal(logits, list(again.values())[0])


@pytest.mark.parametrize("layout", [[], ["--tp", "2"]], ids=["tp1", "tp2"])
def test_generate_equals_transformers(tmp, gpt2_dyn, layout):
    out = compile_model(os.path.join(gpt2_dyn, "model.onnx"),
                        os.path.join(tmp, "gen" + "".join(layout)),
                        "--generate", "--max-seq", "64", "--max-batch", "4",
                        "--max-tokens", "16", *layout)
    ref = json.load(open(os.path.join(gpt2_dyn, "generate.json")))
    with pcc.Session(out) as s:
        assert s.num_ranks == (2 if layout else 1)
        # Two calls: the ranks stay up between them.
        for _ in range(2):
            results = s.generate(ref["prompts"],
                                 max_new_tokens=ref["max_new_tokens"])
            assert [r.tokens for r in results] == ref["tokens"]
            assert all(r.finish_reason == "length" for r in results)
            assert all(r.text is None for r in results)
        sampled = s.generate([ref["prompts"][2]] * 2, max_new_tokens=6,
                             temperature=0.8, seed=5)
        assert sampled[0].tokens == sampled[1].tokens
        # transformers' repetition penalty (export_penalties.py's tokens).
        pen = json.load(open(os.path.join(ROOT, "test", "e2e", "generate",
                                          "Inputs", "penalties",
                                          "gpt2-repetition.json")))
        penalized = s.generate(pen["prompts"],
                               max_new_tokens=pen["max_new_tokens"],
                               **pen["sampling"])
        assert [r.tokens for r in penalized] == pen["tokens"]
        # A generation config's as arguments: min_new_tokens holds back a
        # stop token, the other ends requests.
        cfg = json.load(open(os.path.join(ROOT, "test", "e2e", "generate",
                                          "Inputs", "penalties",
                                          "gpt2-config.json")))
        gc = cfg["generation_config"]
        held = s.generate(cfg["prompts"], max_new_tokens=gc["max_new_tokens"],
                          min_new_tokens=gc["min_new_tokens"],
                          repetition_penalty=gc["repetition_penalty"],
                          stop=gc["eos_token_id"])
        assert [r.tokens for r in held] == cfg["tokens"]
        assert [r.finish_reason for r in held] == cfg["finish_reasons"]


def test_generate_text(tmp, gpt2_dyn):
    out = compile_model(os.path.join(gpt2_dyn, "model.onnx"),
                        os.path.join(tmp, "gen-text"), "--generate",
                        "--max-seq", "64", "--max-batch", "2")
    tokenizer = os.path.join(ROOT, "test", "e2e", "serve",
                             "tokenizer-384.json")
    with pcc.Session(out, tokenizer=tokenizer) as s:
        text = "the quick brown fox"
        ids = s.tokenizer.encode(text)
        by_text, by_ids = s.generate([text, ids], max_new_tokens=5)
        assert by_text.tokens == by_ids.tokens
        assert by_text.text == s.tokenizer.decode(by_text.tokens)
        assert isinstance(by_text.text, str)


def test_chat(tmp, gpt2_dyn):
    # A conversation through a chat template: the answer of the text
    # transformers renders for it (test/tokenizer's references).
    out = os.path.join(tmp, "gen-text")
    if not os.path.exists(out):
        compile_model(os.path.join(gpt2_dyn, "model.onnx"), out, "--generate",
                      "--max-seq", "64", "--max-batch", "2")
    data = os.path.join(ROOT, "test", "tokenizer", "data", "chat")
    rendered = json.load(open(os.path.join(data, "expected.json"),
                              encoding="utf-8"))["chatml"][0]
    case = json.loads(open(os.path.join(data, "cases.jsonl"),
                           encoding="utf-8").readline())
    template = pcc.ChatTemplate(os.path.join(data, "chatml.jinja"))
    assert template.render(case["messages"]) == rendered
    tokenizer = os.path.join(ROOT, "test", "e2e", "serve",
                             "tokenizer-384.json")
    # Zephyr's template: a prompt short enough for --max-seq 64 in the
    # test tokenizer's bytes.
    template = pcc.ChatTemplate(os.path.join(data, "zephyr.jinja"))
    short = [{"role": "user", "content": "Hi"}]
    with pcc.Session(out, tokenizer=tokenizer,
                     chat_template=template) as s:
        (answer,) = s.chat([short], max_new_tokens=4)
        (same,) = s.generate([template.render(short)], max_new_tokens=4)
        assert answer.tokens == same.tokens and answer.text == same.text
    with pytest.raises(pcc.Error, match="not supported"):
        bad = os.path.join(tmp, "bad.jinja")
        open(bad, "w").write("{% macro m() %}{% endmacro %}")
        pcc.ChatTemplate(bad)


def test_train_step_equals_pytorch(tmp, gpt2_tiny):
    out = compile_model(os.path.join(gpt2_tiny, "model.onnx"),
                        os.path.join(tmp, "train"), "--train", "--optimizer",
                        "sgd", "--lr", "0.1")
    ids = read_pb(os.path.join(gpt2_tiny, "ref", "input_0.pb"))
    want = json.load(open(os.path.join(MODELS, "gpt2-tiny.sgd.json")))
    with pcc.Session(out) as s:
        name = s._session.input_names[0]
        losses = [float(s.train_step({name: ids})["loss"])
                  for _ in want["losses"]]
    np.testing.assert_allclose(losses, want["losses"], rtol=1e-5)


def test_evaluate_follows_training(tmp, gpt2_tiny):
    # A --train --eval build: the evaluation step reads the parameters the
    # training steps update. Before any step its loss is the first training
    # step's (taken before that step's update); after one SGD step it is the
    # second's, and evaluating changes nothing.
    out = compile_model(os.path.join(gpt2_tiny, "model.onnx"),
                        os.path.join(tmp, "train-eval"), "--train", "--eval",
                        "--optimizer", "sgd", "--lr", "0.1")
    ids = read_pb(os.path.join(gpt2_tiny, "ref", "input_0.pb"))
    want = json.load(open(os.path.join(MODELS, "gpt2-tiny.sgd.json")))
    with pcc.Session(out) as s:
        name = s._session.input_names[0]
        before = float(s.evaluate({name: ids})["loss"])
        first = float(s.train_step({name: ids})["loss"])
        after = [float(s.evaluate({name: ids})["loss"]) for _ in range(2)]
        second = float(s.train_step({name: ids})["loss"])
        with pytest.raises(pcc.Error, match="no entry 'nope'"):
            s.run({name: ids}, entry="nope")
    np.testing.assert_allclose([before, first], want["losses"][0], rtol=1e-5)
    np.testing.assert_allclose(after + [second], want["losses"][1], rtol=1e-5)


def test_errors_are_exceptions(tmp, gpt2_tiny, gpt2_dyn):
    out = os.path.join(tmp, "infer")
    if not os.path.exists(out):
        compile_model(os.path.join(gpt2_tiny, "model.onnx"), out)
    with pcc.Session(out) as s:
        name = s._session.input_names[0]
        with pytest.raises(pcc.Error, match="must be"):
            s.run({name: np.zeros((3, 3), dtype=np.int64)})
        with pytest.raises(pcc.Error, match="no input 'nope'"):
            ids = read_pb(os.path.join(gpt2_tiny, "ref", "input_0.pb"))
            s.run({name: ids, "nope": ids})
        with pytest.raises(pcc.Error, match="not a generation build"):
            s.generate([[1, 2]])
        with pytest.raises(pcc.Error, match="not a training build"):
            s.train_step({name: ids})
        # Still usable after each.
        assert s.run({name: ids})
    with pytest.raises(pcc.Error, match="no libmodel.so"):
        pcc.Session(os.path.join(tmp, "missing"))
    gen = os.path.join(tmp, "gen")
    if os.path.exists(gen):
        with pcc.Session(gen) as s:
            with pytest.raises(pcc.Error, match="outside the vocabulary"):
                s.generate([[10 ** 6]])
            with pytest.raises(pcc.Error, match="needs a tokenizer"):
                s.generate(["text"])
            with pytest.raises(pcc.Error, match="presence_penalty must be"):
                s.generate([[1, 2]], presence_penalty=2.5)
    with pytest.raises(pcc.Error):
        pcc.Tokenizer(os.path.join(tmp, "no-such-tokenizer.json"))
