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
# The two plans may order their jobs differently (the schedule follows
# the estimated times): a job is matched by its label, device, queue,
# program name and copies, in order among equals.


def ident(plan, job):
    prog = plan["programs"][job["program"]]["name"] if job["kind"] == "run" else ""
    copies = tuple(c["bytes"] for c in job.get("copies", []))
    return (job.get("label"), job.get("device", 0), job.get("queue"), prog, copies)


def times(plan):
    out = {}
    for j in plan["jobs"]:
        out.setdefault(ident(plan, j), []).append(j.get("predicted_ms", 0))
    return out


before = times(base)
changed, kept = True, True
for j in timed["jobs"]:
    old = before[ident(timed, j)].pop(0)
    moved = old != j.get("predicted_ms", 0)
    if j["kind"] == "run" and j["program"] in profiled:
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
