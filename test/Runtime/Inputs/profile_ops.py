# profile-ops.test's check: which jobs a measured profile's "ops" changed.
# argv: the ops-only profile, the plan without it and with it (rp-run
# --describe=json), rp-run's stderr of the profiled run. A call's key is
# rp/timing/Measured.h's measuredOpKey: op kind, element type (the first
# floating-point operand's), input and output shapes.
import json
import re
import sys

ops = json.load(open(sys.argv[1]))["ops"]
base, timed = json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
FLOAT = {"f32", "f16", "bf16", "f64"}


def key(op, dtype, inputs, outputs):
    return (op, dtype, tuple(map(tuple, inputs)), tuple(map(tuple, outputs)))


named = {key(o["op"], o["dtype"], o["inputs"], o["outputs"]) for o in ops}
buffers = timed["buffers"]


def call_key(c):
    operands = c["inputs"] + c["outputs"]
    dtype = next((buffers[b]["dtype"] for b in operands
                  if buffers[b]["dtype"] in FLOAT), "f32")
    return key(c["op"], dtype, [buffers[b]["shape"] for b in c["inputs"]],
               [buffers[b]["shape"] for b in c["outputs"]])


profiled = {p for p, prog in enumerate(timed["programs"])
            if any(call_key(c) in named for c in prog["calls"])}
changed, kept = True, True
for a, b in zip(base["jobs"], timed["jobs"]):
    moved = a.get("predicted_ms", 0) != b.get("predicted_ms", 0)
    if b["kind"] == "run" and b["program"] in profiled:
        changed = changed and moved
    else:
        kept = kept and not moved
print("jobs with a profiled call changed:", changed)
print("every other job kept its time:", kept)
# For people reading the log: the predicted steps and the measured one.
step = lambda d: max(j.get("predicted_start_ms", 0) + j.get("predicted_ms", 0)
                     for j in d["jobs"])
measured = re.search(r"jobs ran ([0-9.]+) ms each", open(sys.argv[4]).read())
print("jobs phase: model", step(base), "ops", step(timed), "measured",
      measured.group(1) if measured else "?")
