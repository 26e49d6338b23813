"""Counts a plan's matmul calls by fused epilogue (rp-run --describe=json).

Prints one line per epilogue, "NAME COUNT", over the first slot's programs
(a stage job's slots repeat the same calls), or "none" when no matmul call
has an epilogue. The names are kernels::MatmulEpilogue's (Kinds.h).
"""
import collections
import json
import sys

NAMES = ["none", "bias", "bias_gelu", "bias_gelu_tanh", "dgelu", "dgelu_tanh"]

plan = json.load(open(sys.argv[1]))
counts = collections.Counter()
for program in plan["programs"]:
    if "slot" in program["name"] and not program["name"].endswith("slot0"):
        continue
    for call in program["calls"]:
        if call["op"] == "matmul" and len(call["ints"]) > 2 and call["ints"][2]:
            counts[NAMES[call["ints"][2]]] += 1
            assert len(call["inputs"]) == 3, call
for name in NAMES[1:]:
    if counts[name]:
        print(name, counts[name])
if not counts:
    print("none")
