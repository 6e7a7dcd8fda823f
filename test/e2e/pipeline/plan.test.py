"""Reads the plans `plan.test` makes and prints what it checks."""
import json
import sys

root = sys.argv[1]


def load(name):
    with open(f"{root}/{name}/plan.json") as f:
        return json.load(f)


one = load("1f1b")
s = one["schedule"]
p, m = len(one["stages"]), s["microbatches"]
print(f"1f1b: stages {p}, every stage has ops, "
      f"bubble <= (p-1)/(m+p-1): "
      f"{all(st['ops'] > 0 for st in one['stages']) and s['bubble_fraction'] <= (p - 1) / (m + p - 1) + 0.05}")
print("1f1b: rank 0 actions " + " ".join(s["ranks"][0]["actions"][:8]))
print(f"1f1b: peak stashed {[r['peak_stashed'] for r in s['ranks']]}")
# Transfers are on the timeline: rank 1's first forward starts when rank
# 0's first activations arrive, after their time in flight.
first_send = s["ranks"][0]["sends"][0]
first_f1 = s["ranks"][1]["timeline"][0]
flight = one["stages"][0]["send_activations_time"]
print(f"1f1b: first send {first_send[0]}, in flight "
      f"{abs(first_send[2] - first_send[1] - flight) < 1e-12 and flight > 0}, "
      f"rank 1 starts on arrival {abs(first_f1[1] - first_send[2]) < 1e-12}")
# A sent buffer counts only while its send is in flight: rank 0 sends m
# microbatches' activations, far fewer are ever in flight at once.
sent = one["stages"][0]["send_activations_bytes"]
peak_sent = s["ranks"][0]["peak_send_bytes"]
print(f"1f1b: sends in flight on rank 0 at most {peak_sent // sent} of {m}")
gp = load("gpipe")["schedule"]
print(f"gpipe: peak stashed {[r['peak_stashed'] for r in gp['ranks']]}")
il = load("interleaved")
print(f"interleaved: stages {len(il['stages'])}, actions name chunks: "
      f"{il['schedule']['ranks'][0]['actions'][0]}")
pi, mi = 2, il["schedule"]["microbatches"]
print(f"interleaved bubble < 1f1b-equivalent bubble: "
      f"{il['schedule']['bubble_fraction'] < (pi - 1) / (mi + pi - 1)}")
zb = load("zb")["schedule"]
has_w = any(a.startswith("W") for r in zb["ranks"] for a in r["actions"])
print(f"zb-h1: W actions: {has_w}, bubble < 1f1b bubble: "
      f"{zb['bubble_fraction'] < s['bubble_fraction']}")
t = load("tp2pp2")
print(f"tp2pp2: mesh tp {t['mesh']['tp']} pp {t['mesh']['pp']}, "
      f"stages {len(t['stages'])}")
