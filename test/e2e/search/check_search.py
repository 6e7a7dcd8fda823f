"""Checks a search's DIR/search.json against the contract: best, candidates,
rejected and seconds; each layout with dp, tp, pp, microbatches, schedule,
virtual_stages, sequence_parallel, zero and recompute and its prediction;
the layouts use the devices; the best is the fastest exact plan, fits, and
is the layout of DIR/plan.json. With `split`, the best divides the model
(tp or pp above 1) or its state (ZeRO). Prints ok, or what failed and exits 1."""

import json
import sys

folder, devices = sys.argv[1], int(sys.argv[2])
split = len(sys.argv) > 3 and sys.argv[3] == "split"
search = json.load(open(folder + "/search.json"))
plan = json.load(open(folder + "/plan.json"))
keys = {"dp", "tp", "pp", "microbatches", "schedule", "virtual_stages",
        "sequence_parallel", "zero", "recompute", "prediction"}
problems = []
for key in ("best", "candidates", "rejected", "seconds"):
    if key not in search:
        problems.append("no " + key)
best = search["best"]
for layout in [best] + search["candidates"]:
    if not keys <= set(layout):
        problems.append("missing %s" % (keys - set(layout)))
    if layout["dp"] * layout["tp"] * layout["pp"] != devices:
        problems.append("%s does not use %d devices" % (layout, devices))
    for k in ("step_seconds", "tokens_per_second", "mfu", "peak_bytes"):
        if k not in layout["prediction"]:
            problems.append("prediction without " + k)
exact = [c for c in search["candidates"] if c["exact"]]
if not best["exact"] or not best["prediction"]["fits"]:
    problems.append("the best is not an exact plan that fits")
if min(c["prediction"]["step_seconds"] for c in exact) != \
        best["prediction"]["step_seconds"]:
    problems.append("the best is not the fastest exact plan")
mesh = plan["mesh"]
if (mesh["dp"], mesh["tp"], mesh["pp"]) != (best["dp"], best["tp"], best["pp"]):
    problems.append("plan.json is not the best layout's")
if plan["prediction"]["step_seconds"] != best["prediction"]["step_seconds"]:
    problems.append("plan.json's prediction is not the best's")
if split and best["tp"] == 1 and best["pp"] == 1 and best["zero"] == 0:
    problems.append("the best splits neither the model nor its state")
if not isinstance(search["rejected"], dict):
    problems.append("rejected is not counts by reason")
print("ok" if not problems else "FAIL " + "; ".join(problems))
sys.exit(1 if problems else 0)
