"""Prints a dp build's plan.json: the mesh, each rank's coordinates, and the
collectives by kind and the mesh axes they run over."""
import json
import sys

plan = json.load(open(sys.argv[1]))
mesh = plan["mesh"]
print("mesh dp %d pp %d tp %d" % (mesh["dp"], mesh["pp"], mesh["tp"]))
print(" ".join("rank %d (%d, %d, %d)" % (r["rank"], r["coords"]["dp"],
                                         r["coords"]["pp"], r["coords"]["tp"])
               for r in plan["ranks"]))
for c in sorted(plan["collectives"], key=lambda c: (c["kind"], c["axes"])):
    assert c["bytes"] > 0
    print("%s over %s: %d" % (c["kind"], c["axes"], c["count"]))
