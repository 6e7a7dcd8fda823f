"""pcc from Python: a compiled build kept loaded, its ranks up between calls.

    import pcc
    s = pcc.Session("out")                      # pcc compile ... -o out
    s.run({"input_ids": ids})                   # -> {"logits": array}
    s.generate([[464, 2068]], max_new_tokens=8) # a --generate build
    s.chat([[{"role": "user", "content": "Hi"}]])  # with a tokenizer and
                                                   # a chat template
    s.train_step({"input_ids": x, "labels": y}) # a --train build

A build of several ranks (tp x pp) runs rank 0 in this process and the
others as `pcc follow` processes that this module starts; they stay up
until the session is closed (close(), a with block, or the interpreter's
exit). Errors in pcc are raised as pcc.Error with pcc's message.
"""

import json
import os

from . import _pcc
from ._pcc import Error, Result, Tokenizer

__all__ = ["Session", "Tokenizer", "ChatTemplate", "Result", "Error"]

# Where the build put pcc, unless PCC_EXECUTABLE says otherwise.
from ._config import PCC_EXECUTABLE as _BUILT_PCC


class ChatTemplate:
    """A model's chat template: a Jinja file, or a tokenizer_config.json
    (its chat_template, bos_token and eos_token), rendered as transformers'
    apply_chat_template renders it."""

    def __init__(self, path):
        self._template = _pcc._ChatTemplate(os.fspath(path))

    def render(self, messages, add_generation_prompt=True, **variables):
        """The text of `messages` (a list of {"role", "content"} dicts);
        other variables (tools, bos_token, ...) as keyword arguments."""
        variables = dict(variables, messages=list(messages),
                         add_generation_prompt=bool(add_generation_prompt))
        return self._template.render(json.dumps(variables))


class Session:
    """A build of `pcc compile` (the folder it wrote), loaded once."""

    def __init__(self, dir, tokenizer=None, timeout=300.0, chat_template=None):
        dir = os.path.abspath(os.fspath(dir))
        library = os.path.join(dir, "libmodel.so")
        if not os.path.exists(library):
            raise Error(f"{dir}: no libmodel.so (not a folder of pcc compile)")
        if os.path.exists(os.path.join(dir, "model.cu")):
            raise Error(f"{dir}: a CUDA build; pcc.Session runs CPU builds "
                        "(serve CUDA builds with pcc serve)")
        weights = os.path.join(dir, "weights.safetensors")
        if not os.path.exists(weights):
            weights = ""
        max_sequence = 0
        report = os.path.join(dir, "report.json")
        if os.path.exists(report):
            with open(report) as f:
                generation = json.load(f).get("generation") or {}
            max_sequence = int(generation.get("max_seq", 0))
        self.max_sequence = max_sequence
        self.tokenizer = None
        if tokenizer is not None:
            self.tokenizer = (tokenizer if isinstance(tokenizer, Tokenizer)
                              else Tokenizer(os.fspath(tokenizer)))
        self.chat_template = None
        if chat_template is not None:
            self.chat_template = (chat_template
                                  if isinstance(chat_template, ChatTemplate)
                                  else ChatTemplate(chat_template))
        pcc = os.environ.get("PCC_EXECUTABLE", _BUILT_PCC)
        self._session = _pcc._Session(dir, library, weights, max_sequence,
                                      pcc, float(timeout))

    @property
    def num_ranks(self):
        return self._session.num_ranks

    def run(self, feeds, entry=None):
        """The model's step (or its entry point `entry`) on {input name:
        array}; {output name: array}."""
        return self._session.run(dict(feeds), entry or "")

    def train_step(self, batch):
        """One training step of a --train build (its weights and optimizer
        state updated in place); returns its outputs, the loss among them."""
        if not self._session.is_training:
            raise Error("not a training build (compile it with pcc compile "
                        "--train)")
        return self._session.run(dict(batch))

    def evaluate(self, batch):
        """The loss of a --train --eval build's evaluation step on `batch`,
        at the parameters the training steps have reached (its outputs, the
        loss among them); no parameter changes."""
        return self._session.run(dict(batch), "eval")

    def generate(self, prompts, max_new_tokens=16, temperature=0.0, top_k=0,
                 top_p=1.0, seed=0, stop=(), repetition_penalty=1.0,
                 presence_penalty=0.0, frequency_penalty=0.0,
                 min_new_tokens=0):
        """Generates for every prompt (a list of token ids, or a string with
        a tokenizer) with continuous batching; one Result per prompt, in
        order, with .tokens, .finish_reason and, with a tokenizer, .text.
        The penalties are as pcc generate's (--repetition-penalty: the
        transformers and vLLM one; presence and frequency: OpenAI's);
        no token of `stop` is chosen before min_new_tokens."""
        if isinstance(prompts, (str, bytes)) or (
                prompts and isinstance(prompts[0], int)):
            raise Error("prompts is a list of prompts (each a list of token "
                        "ids or a string)")
        ids = []
        for p in prompts:
            if isinstance(p, str):
                if self.tokenizer is None:
                    raise Error("a text prompt needs a tokenizer "
                                "(pcc.Session(dir, tokenizer=...))")
                ids.append(self.tokenizer.encode(p))
            else:
                ids.append([int(t) for t in p])
        if self.max_sequence:
            for i, p in enumerate(ids):
                if not 1 <= len(p) <= self.max_sequence:
                    raise Error(f"prompt {i} has {len(p)} tokens; prompts "
                                f"take 1 to {self.max_sequence}")
        results = self._session.generate(ids, int(max_new_tokens),
                                         float(temperature), int(top_k),
                                         float(top_p), int(seed),
                                         [int(t) for t in stop],
                                         float(repetition_penalty),
                                         float(presence_penalty),
                                         float(frequency_penalty),
                                         int(min_new_tokens))
        if self.tokenizer is not None:
            for r in results:
                r.text = self.tokenizer.decode(r.tokens)
        return results

    def chat(self, conversations, **options):
        """Generates the assistant's answer to each conversation (a list of
        {"role", "content"} messages) through the chat template and the
        tokenizer; the options are generate()'s. One Result per
        conversation, its .text the answer."""
        if self.tokenizer is None or self.chat_template is None:
            raise Error("chat needs a tokenizer and a chat template "
                        "(pcc.Session(dir, tokenizer=..., chat_template=...))")
        if conversations and isinstance(conversations[0], dict):
            raise Error("conversations is a list of conversations (each a "
                        "list of messages)")
        return self.generate([self.chat_template.render(c)
                              for c in conversations], **options)

    def close(self):
        """Ends the session: the other ranks exit."""
        self._session.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
