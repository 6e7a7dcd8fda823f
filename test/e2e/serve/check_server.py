"""Drives `pcc serve` as its users do, over plain HTTP (and with the
`openai` package where it is installed), and checks what it answers.

  check_server.py PCC OUT REF.json TOKENIZER [--ranks N] [--queue]
                  [--expect-ids IDS] [--penalties PEN.json]

starts `PCC serve OUT --port 0 --tokenizer TOKENIZER --api-key KEY`, then:
  - 24 concurrent greedy requests (the fixture's prompts in turn) whose
    tokens must equal REF.json's (transformers' generate()), six bad
    requests among them answered 400, one without the key answered 401;
  - a streamed request: at least two chunks, then [DONE], the same tokens;
  - with --penalties, PEN.json's prompts with its "sampling" (presence and
    frequency penalties): its tokens;
  - the longest prompt twice: the second's usage counts the cached tokens
    of its full blocks (blocks of 16 positions), and its tokens are the same;
  - a text prompt: its prompt_token_ids equal the tokenizer's encoding, and
    its tokens and text equal those of the same ids given as a prompt;
  - /v1/models, /health and /metrics;
  - SIGTERM: the server and every rank end within 10 s, none left.
With --queue it starts it with --max-queue 1 instead and checks that
requests beyond the queue get 503 while the others are served. With --chat TEMPLATE (a
template of test/tokenizer/data/chat) it starts it with --chat-template
set to a tokenizer_config.json of TEMPLATE and the special tokens of
cases.jsonl (with --beside, that file beside a copy of TOKENIZER, without
--chat-template), and checks that chat completions equal the completions of the
text transformers renders for the same conversations (expected.json),
streamed and not, and that a template's own error is a 400. With
--generation-config it starts it with REF.json's "generation_config"
(export_penalties.py's gpt2-config.json) and checks that requests of a
prompt alone get REF.json's tokens and "finish_reasons".
Prints one `ok ...` line per check; exits 1 at the first failure.
"""
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

KEY = "sk-pcc-test"


SERVERS = []


def fail(message):
    print("FAIL " + message)
    sys.stdout.flush()
    for server in SERVERS:
        server.proc.kill()
        server.proc.wait()
    raise SystemExit(1)


class Server:
    def __init__(self, pcc, out, args):
        self.out = out
        SERVERS.append(self)
        self.proc = subprocess.Popen(
            [pcc, "serve", out, "--port", "0"] + args,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line = self.proc.stdout.readline()
        while line and "serving" not in line:
            line = self.proc.stdout.readline()
        if "http://" not in line:
            fail("no serving line: %r (exit %s)" % (line, self.proc.poll()))
        self.base = line.split("http://")[1].split()[0]
        self.lines = []
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stdout:
            self.lines.append(line)

    def request(self, method, path, body=None, key=KEY, raw=None):
        data = raw if raw is not None else (
            json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request("http://%s%s" % (self.base, path),
                                     data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if key:
            req.add_header("Authorization", "Bearer " + key)
        # As the openai client does, a connection the server's accept
        # queue dropped is tried again (said on stderr); an answer is not.
        for attempt in range(3):
            try:
                with urllib.request.urlopen(req, timeout=300) as r:
                    return r.status, r.read().decode()
            except urllib.error.HTTPError as e:
                return e.code, e.read().decode()
            except ConnectionError as e:
                if attempt == 2:
                    raise
                print("note: %s %s: %s, tried again" % (method, path, e),
                      file=sys.stderr)

    def stop(self):
        """SIGTERM; the server and all its ranks must end within 10 s."""
        start = time.time()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            fail("the server did not end within 10 s of SIGTERM")
        if self.proc.returncode != 0:
            fail("the server exited with %s after SIGTERM: %s" %
                 (self.proc.returncode, "".join(self.lines[-5:])))
        left = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                cmd = open("/proc/%s/cmdline" % pid, "rb").read()
            except OSError:
                continue
            args = cmd.split(b"\0")
            if self.out.encode() in args and b"serve" in args:
                left.append(pid)
        if left:
            fail("processes left after SIGTERM: %s" % left)
        return time.time() - start


def completion(server, body, key=KEY, path="/v1/completions"):
    status, text = server.request("POST", path, body, key)
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def check_error(status, answer, want, what):
    if status != want:
        fail("%s: status %s, expected %s: %s" % (what, status, want, answer))
    error = answer.get("error") if isinstance(answer, dict) else None
    if not error or not all(k in error for k in ("message", "type", "code")):
        fail("%s: not an OpenAI error object: %s" % (what, answer))


def main(argv):
    pcc, out, ref_path, tokenizer = argv[:4]
    ranks = int(argv[argv.index("--ranks") + 1]) if "--ranks" in argv else 1
    ref = json.load(open(ref_path))
    prompts, tokens, n = ref["prompts"], ref["tokens"], ref["max_new_tokens"]

    if "--queue" in argv:
        server = Server(pcc, out, ["--max-queue", "1"])
        # Long enough that the batch is full while the others come, and
        # sent together (a barrier): threads started one by one on a busy
        # machine were each served before the next came.
        results = [None] * 12
        together = threading.Barrier(12)

        def send(i):
            together.wait()
            results[i] = completion(server, {
                "prompt": prompts[i % 2], "max_tokens": 40,
                "temperature": 0})

        threads = [threading.Thread(target=send, args=(i,)) for i in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        busy = [r for r in results if r[0] == 503]
        served = [(i, r) for i, r in enumerate(results) if r[0] == 200]
        for status, answer in busy:
            check_error(status, answer, 503, "a request past --max-queue")
        if not busy or not served:
            fail("--max-queue 1: %d answered 503, %d served" %
                 (len(busy), len(served)))
        for i, (status, answer) in served:
            if answer["choices"][0]["token_ids"][:n] != tokens[i % 2]:
                fail("a served request's tokens differ from transformers'")
        print("ok --max-queue 1: %d of 12 requests answered 503, the others "
              "served" % len(busy))
        server.stop()
        return 0

    if "--chat" in argv:
        # /v1/chat/completions through a chat template (a template of
        # test/tokenizer/data/chat): each conversation's answer equals the
        # completion of the text transformers renders for it
        # (expected.json), streamed or not; a template's own error is a 400.
        template = argv[argv.index("--chat") + 1]
        data = os.path.dirname(template)
        name = os.path.basename(template)[:-len(".jinja")]
        rendered = json.load(open(os.path.join(data, "expected.json"),
                                  encoding="utf-8"))[name]
        cases = [json.loads(l) for l in
                 open(os.path.join(data, "cases.jsonl"), encoding="utf-8")]
        # As a model's tokenizer_config.json: the template, and the special
        # tokens the cases were rendered with.
        import tempfile
        config = os.path.join(tempfile.mkdtemp(), "tokenizer_config.json")
        with open(config, "w", encoding="utf-8") as f:
            json.dump({"chat_template": open(template, encoding="utf-8").read(),
                       "bos_token": cases[0]["bos_token"],
                       "eos_token": {"content": cases[0]["eos_token"]}}, f)
        if "--beside" in argv:
            # Found beside the tokenizer, as a model's folder holds both.
            import shutil
            beside = os.path.join(os.path.dirname(config), "tokenizer.json")
            shutil.copy(tokenizer, beside)
            server = Server(pcc, out, ["--tokenizer", beside])
        else:
            server = Server(pcc, out, ["--tokenizer", tokenizer,
                                       "--chat-template", config])
        checked = 0
        for case, text in zip(cases, rendered):
            if not case["add_generation_prompt"] or not case["messages"]:
                continue
            body = {"messages": case["messages"], "max_tokens": 6,
                    "temperature": 0, "return_token_ids": True}
            status, chat = completion(server, body, path="/v1/chat/completions")
            if isinstance(text, dict):
                check_error(status, chat, 400, "a template's error")
                if text["error"].split(": ", 1)[1] not in chat["error"]["message"]:
                    fail("chat error: %s, transformers %s" % (chat, text))
                continue
            status2, plain = completion(server, {
                "prompt": text, "max_tokens": 6, "temperature": 0,
                "return_token_ids": True})
            if status != 200 or status2 != 200:
                fail("chat: %s %s / %s %s" % (status, chat, status2, plain))
            c, p = chat["choices"][0], plain["choices"][0]
            if (chat["object"] != "chat.completion" or
                    c["message"]["role"] != "assistant" or
                    c["message"]["content"] != p["text"] or
                    c["token_ids"] != p["token_ids"] or
                    c["prompt_token_ids"] != p["prompt_token_ids"]):
                fail("chat %s, the rendered text's completion %s" % (chat, plain))
            checked += 1
        # Streamed: the role first, then the content in pieces.
        req = urllib.request.Request(
            "http://%s/v1/chat/completions" % server.base, method="POST",
            data=json.dumps({"messages": cases[0]["messages"], "max_tokens": 6,
                             "temperature": 0, "stream": True}).encode())
        req.add_header("Content-Type", "application/json")
        deltas = []
        with urllib.request.urlopen(req, timeout=300) as r:
            for line in r:
                line = line.decode().strip()
                if line.startswith("data: ") and line != "data: [DONE]":
                    chunk = json.loads(line[len("data: "):])
                    if chunk["object"] != "chat.completion.chunk":
                        fail("stream: %s" % chunk)
                    deltas.append(chunk["choices"][0]["delta"])
        status, whole = completion(server, {
            "messages": cases[0]["messages"], "max_tokens": 6,
            "temperature": 0}, path="/v1/chat/completions")
        if (not deltas or deltas[0].get("role") != "assistant" or
                "".join(d.get("content", "") for d in deltas) !=
                whole["choices"][0]["message"]["content"]):
            fail("chat stream: %s, whole %s" % (deltas, whole))
        # Without max_tokens a chat answer runs to the end of the context.
        status, models = server.request("GET", "/v1/models", key=None)
        context = json.loads(models)["data"][0]["max_model_len"]
        status, unlimited = completion(server, {
            "messages": cases[0]["messages"], "temperature": 0},
            path="/v1/chat/completions")
        u = unlimited.get("usage", {})
        if (status != 200 or unlimited["choices"][0]["finish_reason"] != "length"
                or u["prompt_tokens"] + u["completion_tokens"] != context):
            fail("chat without max_tokens: %s (context %d)" % (unlimited, context))
        print("ok chat completions through %s: %d conversations equal the "
              "completions of transformers' rendered text, a stream of %d "
              "chunks" % (name, checked, len(deltas)))
        try:
            import openai
        except ImportError:
            openai = None
        if openai is not None and "--openai" in argv:
            client = openai.OpenAI(base_url="http://%s/v1" % server.base,
                                   api_key=KEY)
            model = os.path.basename(out.rstrip("/"))
            answer = client.chat.completions.create(
                model=model, messages=cases[0]["messages"], max_tokens=6,
                temperature=0)
            streamed = client.chat.completions.create(
                model=model, messages=cases[0]["messages"], max_tokens=6,
                temperature=0, stream=True)
            pieces = [c.choices[0].delta.content or "" for c in streamed
                      if c.choices]
            want = whole["choices"][0]["message"]["content"]
            if (answer.choices[0].message.content != want or
                    answer.choices[0].message.role != "assistant" or
                    "".join(pieces) != want):
                fail("openai client chat: %s / %r, expected %r" %
                     (answer, pieces, want))
            print("ok the openai client's chat completions: the same answer, "
                  "streamed in %d pieces" % len(pieces))
        server.stop()
        return 0

    if "--generation-config" in argv:
        # REF.json's "generation_config" as the server's defaults: requests
        # that give only their prompt get its tokens and finish reasons.
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".json",
                                         delete=False) as f:
            json.dump(ref["generation_config"], f)
        server = Server(pcc, out, ["--generation-config", f.name])
        for i, prompt in enumerate(prompts):
            status, answer = completion(server, {"prompt": prompt})
            if status != 200:
                fail("prompt %d: status %s: %s" % (i, status, answer))
            choice = answer["choices"][0]
            if (choice["token_ids"] != tokens[i] or
                    choice["finish_reason"] != ref["finish_reasons"][i]):
                fail("prompt %d: %s (%s), transformers %s (%s)" %
                     (i, choice["token_ids"], choice["finish_reason"],
                      tokens[i], ref["finish_reasons"][i]))
        os.unlink(f.name)
        print("ok --generation-config: requests of a prompt alone get "
              "transformers' tokens and finish reasons")
        server.stop()
        return 0

    server = Server(pcc, out, (["--tokenizer", tokenizer] if tokenizer != "-"
                               else []) + ["--api-key", KEY])

    # 24 concurrent greedy requests, six bad ones among them.
    good = [None] * 24
    bad_bodies = [
        None,  # not JSON
        {"max_tokens": 4},  # no prompt
        {"prompt": prompts[0], "max_tokens": -1},
        {"prompt": [1, 2, 10 ** 6], "max_tokens": 4},
        {"prompt": prompts[0], "max_tokens": 10 ** 4},  # over --max-seq
        {"prompt": prompts[0], "frequency_penalty": 3},  # over 2
    ]
    bad = [None] * len(bad_bodies)

    def send_good(i):
        good[i] = completion(server, {
            "model": os.path.basename(out.rstrip("/")),
            "prompt": prompts[i % len(prompts)], "max_tokens": n,
            "temperature": 0, "return_token_ids": True})

    def send_bad(i):
        if bad_bodies[i] is None:
            status, text = server.request("POST", "/v1/completions",
                                          raw=b"{not json")
            bad[i] = (status, json.loads(text))
        else:
            bad[i] = completion(server, bad_bodies[i])

    threads = [threading.Thread(target=send_good, args=(i,))
               for i in range(24)]
    threads += [threading.Thread(target=send_bad, args=(i,))
                for i in range(len(bad_bodies))]
    start = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.time() - start
    for i, (status, answer) in enumerate(good):
        if status != 200:
            fail("request %d: status %s: %s" % (i, status, answer))
        choice = answer["choices"][0]
        if choice["token_ids"] != tokens[i % len(prompts)]:
            fail("request %d: %s, transformers %s" %
                 (i, choice["token_ids"], tokens[i % len(prompts)]))
        if choice["finish_reason"] != "length":
            fail("request %d: finish_reason %s" % (i, choice["finish_reason"]))
        usage = answer["usage"]
        if usage["completion_tokens"] != n or usage["prompt_tokens"] != len(
                prompts[i % len(prompts)]):
            fail("request %d: usage %s" % (i, usage))
    print("ok 24 concurrent requests at %d rank(s) equal transformers' "
          "greedy tokens" % ranks)
    for i, (status, answer) in enumerate(bad):
        check_error(status, answer, 400, "bad request %d" % i)
    print("ok %d bad requests answered 400 while the others were served" %
          len(bad_bodies))
    status, answer = completion(server, {"prompt": prompts[0]}, key=None)
    check_error(status, answer, 401, "a request without the key")
    status, answer = completion(server, {"prompt": prompts[0]}, key="wrong")
    check_error(status, answer, 401, "a request with a wrong key")
    print("ok requests without the key or with a wrong one answered 401")

    # Streamed: chunks as the tokens come, then [DONE].
    req = urllib.request.Request(
        "http://%s/v1/completions" % server.base, method="POST",
        data=json.dumps({"prompt": prompts[3], "max_tokens": n,
                         "temperature": 0, "stream": True,
                         "return_token_ids": True}).encode())
    req.add_header("Content-Type", "application/json")
    req.add_header("Authorization", "Bearer " + KEY)
    chunks, done, streamed = 0, False, []
    with urllib.request.urlopen(req, timeout=300) as r:
        if not r.headers.get("Content-Type", "").startswith(
                "text/event-stream"):
            fail("stream: content type %s" % r.headers.get("Content-Type"))
        for line in r:
            line = line.decode().strip()
            if not line:
                continue
            if not line.startswith("data: "):
                fail("stream: not an event: %r" % line)
            data = line[len("data: "):]
            if data == "[DONE]":
                done = True
                continue
            if done:
                fail("stream: an event after [DONE]")
            chunks += 1
            streamed += json.loads(data)["choices"][0]["token_ids"]
    if chunks < 2 or not done or streamed != tokens[3]:
        fail("stream: %d chunks, [DONE] %s, tokens %s, transformers %s" %
             (chunks, done, streamed, tokens[3]))
    print("ok a streamed request: %d chunks, then [DONE], the same tokens" %
          chunks)

    # OpenAI's penalties (a reference of export_penalties.py: the prompts
    # of REF.json, its tokens under the file's "sampling").
    if "--penalties" in argv:
        pen = json.load(open(argv[argv.index("--penalties") + 1]))
        for i, prompt in enumerate(pen["prompts"]):
            body = {"prompt": prompt, "max_tokens": pen["max_new_tokens"],
                    "temperature": 0, "return_token_ids": True}
            body.update(pen["sampling"])
            status, answer = completion(server, body)
            got = answer["choices"][0]["token_ids"] if status == 200 else answer
            if got != pen["tokens"][i]:
                fail("penalties %s, prompt %d: %s, expected %s" %
                     (pen["sampling"], i, got, pen["tokens"][i]))
        print("ok presence and frequency penalties: the reference's tokens")

    # The prefix cache: the same prompt again reuses its full blocks (16
    # positions each; all but the last token), and says so in its usage.
    longest = max(range(len(prompts)), key=lambda i: len(prompts[i]))
    for _ in range(2):
        status, again = completion(server, {
            "prompt": prompts[longest], "max_tokens": 3, "temperature": 0,
            "return_token_ids": True})
    cached = again.get("usage", {}).get("prompt_tokens_details", {}).get(
        "cached_tokens")
    want = (len(prompts[longest]) - 1) // 16 * 16
    if (status != 200 or cached != want or
            again["choices"][0]["token_ids"] != tokens[longest][:3]):
        fail("prefix cache: %s %s, %s cached tokens expected" %
             (status, again, want))
    print("ok a prompt sent again: %d of its %d tokens from the prefix cache, "
          "the same tokens" % (cached, len(prompts[longest])))

    # Text in: the tokenizer's ids, and the same answer as those ids.
    text = "the quick brown fox jumps"
    if tokenizer == "-":
        return finish(server, n)
    status, by_text = completion(server, {
        "prompt": text, "max_tokens": 8, "temperature": 0,
        "return_token_ids": True})
    if status != 200:
        fail("a text prompt: %s %s" % (status, by_text))
    ids = by_text["choices"][0]["prompt_token_ids"]
    status, by_ids = completion(server, {
        "prompt": ids, "max_tokens": 8, "temperature": 0,
        "return_token_ids": True})
    a, b = by_text["choices"][0], by_ids["choices"][0]
    if a["token_ids"] != b["token_ids"] or a["text"] != b["text"]:
        fail("text and ids differ: %s / %s" % (a, b))
    if "--expect-ids" in argv:
        want = json.loads(argv[argv.index("--expect-ids") + 1])
        if ids != want:
            fail("the prompt's ids %s, the tokenizer's %s" % (ids, want))
    print("ok a text prompt equals its token ids' request (text %r)" %
          a["text"])

    # Log-probabilities: the greedy token is the most likely one (two tokens
    # of one text, such as two halves of a character, share a key).
    status, scored = completion(server, {
        "prompt": prompts[1], "max_tokens": 5, "temperature": 0,
        "logprobs": 2, "return_token_ids": True})
    lp = scored["choices"][0]["logprobs"]
    if status != 200 or len(lp["token_logprobs"]) != 5 or any(
            not x <= 0 or max(top.values()) > x + 1e-9 or len(top) > 2
            for x, top in zip(lp["token_logprobs"], lp["top_logprobs"])):
        fail("logprobs: %s" % scored)
    print("ok logprobs: each greedy token the most likely of its top 2")

    # A stop string: the text ends before it, streamed or not.
    import re
    words = [m for m in re.finditer(r"[a-z]{2,}", a["text"]) if m.start() > 0]
    if words:
        stop = words[0].group()
        want = a["text"][:a["text"].find(stop)]
        status, stopped = completion(server, {
            "prompt": text, "max_tokens": 8, "temperature": 0,
            "stop": [stop]})
        c = stopped["choices"][0]
        if c["text"] != want or c["finish_reason"] != "stop":
            fail("stop %r: %r (%s), expected %r" %
                 (stop, c["text"], c["finish_reason"], want))
        print("ok a stop string ends the text before it")

    try:
        import openai
    except ImportError:
        openai = None
    if openai is not None and text is not None:
        client = openai.OpenAI(base_url="http://%s/v1" % server.base,
                               api_key=KEY)
        answer = client.completions.create(
            model=os.path.basename(out.rstrip("/")), prompt=prompts[2],
            max_tokens=n, temperature=0,
            extra_body={"return_token_ids": True})
        got = answer.choices[0].model_extra.get("token_ids") or getattr(
            answer.choices[0], "token_ids", None)
        if got != tokens[2]:
            fail("openai client: %s, transformers %s" % (got, tokens[2]))
        stream = client.completions.create(
            model=os.path.basename(out.rstrip("/")), prompt=text,
            max_tokens=8, temperature=0, stream=True)
        pieces = [c.choices[0].text for c in stream if c.choices]
        if "".join(pieces) != a["text"] or len(pieces) < 2:
            fail("openai client stream: %r, %r" % (pieces, a["text"]))
        print("ok the openai client: the same tokens, and a stream of %d "
              "pieces" % len(pieces))

    return finish(server, n)


def finish(server, n):
    status, models = server.request("GET", "/v1/models")
    models = json.loads(models)
    if status != 200 or models["data"][0]["id"] != os.path.basename(
            server.out.rstrip("/")):
        fail("/v1/models: %s %s" % (status, models))
    status, _ = server.request("GET", "/health", key=None)
    if status != 200:
        fail("/health: %s" % status)
    status, metrics = server.request("GET", "/metrics", key=None)
    for name in ("pcc_requests_total", "pcc_prompt_tokens_total",
                 "pcc_generation_tokens_total", "pcc_requests_running",
                 "pcc_requests_waiting", "pcc_kv_cache_usage_ratio",
                 "pcc_time_to_first_token_seconds_bucket",
                 "pcc_inter_token_latency_seconds_bucket",
                 "pcc_prefix_cache_hits_total"):
        if name not in metrics:
            fail("/metrics has no %s" % name)
    generated = [l for l in metrics.splitlines()
                 if l.startswith("pcc_generation_tokens_total ")]
    if int(generated[0].split()[1]) < 24 * n:
        fail("/metrics: %s" % generated)
    print("ok /v1/models, /health and /metrics (%s)" % generated[0])

    # SIGTERM while requests run: each is finished or answered with an
    # error object (or, sent after the server stopped listening, refused).
    answers = [None] * 4

    def send(i):
        try:
            answers[i] = completion(server, {"prompt": [1 + i],
                                             "max_tokens": 40,
                                             "temperature": 0})
        except (ConnectionError, urllib.error.URLError) as e:
            answers[i] = ("refused", str(e))

    threads = [threading.Thread(target=send, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.05)
    seconds = server.stop()
    for t in threads:
        t.join()
    for status, answer in answers:
        if status == 200:
            continue
        if status != "refused":
            check_error(status, answer, 503, "a request at shutdown")
    print("ok SIGTERM ended the server and its ranks in %.1f s, the "
          "requests running then answered" % seconds)
    return 0


if __name__ == "__main__":
    try:
        status = main(sys.argv[1:])
    finally:
        # Whatever failed, no server outlives the check.
        for server in SERVERS:
            if server.proc.poll() is None:
                server.proc.kill()
                server.proc.wait()
    sys.exit(status)
