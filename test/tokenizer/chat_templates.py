#!/usr/bin/env python3
"""Chat templates rendered by transformers against pcc's renderer.

  chat_templates.py make
      renders every template of data/chat (*.jinja) on every conversation of
      CASES with transformers' own Jinja environment
      (transformers.utils.chat_template_utils, as apply_chat_template uses
      it: trim_blocks, lstrip_blocks, loop controls, raise_exception, its
      tojson) and writes data/chat/cases.jsonl (the variables, a line each)
      and data/chat/expected.json ({template: [text, or {"error": message}
      per case]}). Needs transformers and jinja2 (/work/venv has them).
  chat_templates.py check TOOL [TEMPLATE ...]
      runs `TOOL TEMPLATE.jinja chat < cases.jsonl` (pcc-tokenizer-check)
      for each template (default all) and compares its lines with
      expected.json: equal text, or an error (pcc's message must hold the
      template's own raise_exception text; for Jinja's errors, such as an
      undefined value subscripted, any error). Prints one ok line a template;
      exits 1 at any difference.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data", "chat")

SYSTEM = {"content": "You are terse. Answer in one line.", "role": "system"}
CASES = [
    {"messages": [{"content": "Hello, who are you?", "role": "user"}],
     "add_generation_prompt": True},
    {"messages": [{"content": "Hello, who are you?", "role": "user"}],
     "add_generation_prompt": False},
    {"messages": [SYSTEM, {"content": "Name three colours.", "role": "user"}],
     "add_generation_prompt": True},
    {"messages": [{"content": "  Hi there \n", "role": "user"},
                  {"content": "Hello! How can I help?", "role": "assistant"},
                  {"content": "Explain x in two\nlines.", "role": "user"}],
     "add_generation_prompt": True},
    {"messages": [{"content": "Übersetze: café ☕ — 日本語 🙂", "role": "user"}],
     "add_generation_prompt": True},
    {"messages": [SYSTEM, {"content": "What is 2+2?", "role": "user"},
                  {"content": "4", "role": "assistant",
                   "tool_calls": [{"arguments": {"a": 2, "b": 2.5},
                                   "name": "add"}]},
                  {"content": "{\"sum\": 4}", "role": "tool"},
                  {"content": "Hello again", "role": "user"}],
     "add_generation_prompt": False},
    # Roles out of turn: the templates that check raise their error.
    {"messages": [{"content": "a", "role": "user"},
                  {"content": "b", "role": "user"}],
     "add_generation_prompt": True},
    {"messages": [], "add_generation_prompt": True},
    # Tools, as OpenAI's requests give them.
    {"messages": [{"content": "Weather in Paris?", "role": "user"},
                  {"content": "", "role": "assistant",
                   "tool_calls": [{"function": {"arguments": {"city": "Paris"},
                                                "name": "weather"},
                                   "type": "function"}]},
                  {"content": "18 C, clear", "role": "tool"},
                  {"content": "22 C", "role": "tool"}],
     "add_generation_prompt": True,
     "tools": [{"function": {"description": "The weather of a city.",
                             "name": "weather",
                             "parameters": {"properties": {"city": {"type": "string"}},
                                            "type": "object"}},
                "type": "function"}]},
]
TOKENS = {"bos_token": "<s>", "eos_token": "</s>"}


def templates():
    return sorted(f[:-len(".jinja")] for f in os.listdir(DATA)
                  if f.endswith(".jinja"))


def make():
    from transformers.utils.chat_template_utils import _compile_jinja_template
    expected = {}
    for name in templates():
        template = _compile_jinja_template(
            open(os.path.join(DATA, name + ".jinja"), encoding="utf-8").read())
        out = []
        for case in CASES:
            try:
                out.append(template.render(**dict(TOKENS, **case)))
            except Exception as e:  # the template's own errors
                out.append({"error": "%s: %s" % (type(e).__name__, e)})
        expected[name] = out
    with open(os.path.join(DATA, "cases.jsonl"), "w", encoding="utf-8") as f:
        for case in CASES:
            f.write(json.dumps(dict(TOKENS, **case), ensure_ascii=False) + "\n")
    with open(os.path.join(DATA, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(expected, f, ensure_ascii=False, indent=1)
        f.write("\n")
    return 0


def check(tool, names):
    expected = json.load(open(os.path.join(DATA, "expected.json"),
                              encoding="utf-8"))
    cases = open(os.path.join(DATA, "cases.jsonl"), "rb").read()
    status = 0
    for name in names or templates():
        r = subprocess.run([tool, os.path.join(DATA, name + ".jinja"), "chat"],
                           input=cases, capture_output=True)
        if r.returncode:
            print("FAIL %s: %s" % (name, r.stderr.decode().strip()))
            status = 1
            continue
        got = [json.loads(line) for line in r.stdout.decode().splitlines()]
        problems = []
        for i, (want, have) in enumerate(zip(expected[name], got)):
            if isinstance(want, dict):
                # The template's own raise_exception text, else any error
                # (an undefined value's message is Jinja's own).
                kind, message = want["error"].split(": ", 1)
                if kind != "TemplateError":
                    message = ""
                if not isinstance(have, dict) or message not in have["error"]:
                    problems.append("case %d: %r, transformers raised %r" %
                                    (i, have, want["error"]))
            elif have != want:
                problems.append("case %d: %r, transformers %r" % (i, have, want))
        if len(got) != len(expected[name]):
            problems.append("%d results for %d cases" %
                            (len(got), len(expected[name])))
        for p in problems:
            print("FAIL %s %s" % (name, p))
        status |= bool(problems)
        if not problems:
            print("ok %s: %d cases equal to transformers" % (name, len(got)))
    return status


if __name__ == "__main__":
    if sys.argv[1:2] == ["make"]:
        sys.exit(make())
    sys.exit(check(sys.argv[2], sys.argv[3:]))
