"""Greedy tokens against transformers' generate().

  check_tokens.py prompts REF.json OUT.jsonl [--arrivals]
      writes the requests of REF.json (a fixture's generate.json: prompts,
      max_new_tokens, tokens) as pcc generate's JSONL, each with the keys
      of REF.json's "sampling" if it has one (penalties); with --arrivals
      the later requests arrive while the earlier ones decode
  check_tokens.py check REF.json OUT.jsonl
      compares pcc generate's output with REF.json's tokens and finish
      reasons ("finish_reasons", or "length" for all), request by request;
      prints ok or each mismatch, and exits 1 on any
"""
import json
import sys


def main(argv):
    mode, ref_path, out_path = argv[:3]
    ref = json.load(open(ref_path))
    if mode == "prompts":
        with open(out_path, "w") as f:
            for i, prompt in enumerate(ref["prompts"]):
                request = {"prompt": prompt}
                request.update(ref.get("sampling", {}))
                if "--arrivals" in argv:
                    request["arrival_step"] = 3 * i
                f.write(json.dumps(request) + "\n")
        return 0
    lines = [json.loads(line) for line in open(out_path) if line.strip()]
    problems = []
    if len(lines) != len(ref["tokens"]):
        problems.append("%d results for %d prompts" %
                        (len(lines), len(ref["tokens"])))
    for i, (want, got) in enumerate(zip(ref["tokens"], lines)):
        if got["tokens"] != want:
            problems.append("prompt %d: %s, transformers %s" %
                            (i, got["tokens"], want))
        reason = ref.get("finish_reasons", ["length"] * len(lines))[i]
        if got["finish_reason"] != reason:
            problems.append("prompt %d: finish_reason %s, not %s" %
                            (i, got["finish_reason"], reason))
    for p in problems:
        print("FAIL " + p)
    if problems:
        return 1
    if "finish_reasons" in ref:
        print("ok %d prompts, %d stopped, tokens equal to transformers" %
              (len(lines), ref["finish_reasons"].count("stop")))
    else:
        print("ok %d prompts, %d tokens each, equal to transformers" %
              (len(lines), ref["max_new_tokens"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
