"""Checks a tp build's plan.json against its tp 1 build's report.json."""
import json
import sys

tp1, tpn, tp = sys.argv[1], sys.argv[2], int(sys.argv[3])
plan = json.load(open(tpn + "/plan.json"))
whole = json.load(open(tp1 + "/report.json"))["parameters"]["bytes"]
mesh = plan["mesh"]
ranks = plan["ranks"]
print("mesh tp %d pp %d, %d ranks" % (mesh["tp"], mesh["pp"], len(ranks)))
assert mesh["tp"] == tp and len(ranks) == tp
per = ranks[0]["parameter_bytes"]
assert all(r["parameter_bytes"] == per for r in ranks)
print("parameters per rank: %d of %d whole (%.2f x)" % (per, whole, per / whole))
# Split parameters divide by tp; the whole ones (norms, some biases) stay.
assert whole / tp <= per < whole / tp * 1.1, per
state = ranks[0]["optimizer_state_bytes"]
# AdamW's two moments of every trained parameter (constants stored as
# weights, such as masks, have none) and the step counter.
print("optimizer state per rank: %.2f x parameters" % (state / per))
assert 1.9 < state / per <= 2.01
kinds = sorted(c["kind"] for c in plan["collectives"])
print("collectives: " + ", ".join(kinds))
assert all(c["count"] > 0 and c["bytes"] > 0 for c in plan["collectives"])
print("ok")
