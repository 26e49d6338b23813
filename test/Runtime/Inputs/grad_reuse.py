"""Whether one layer's gradient buffers are reused by the next layer's:
reads a staged plan (rp-run --describe=json, a file) and rp-run's stderr
(its "device buffers per device" line, KiB), and for DEVICE compares the
arena rp-run packed with the bytes of the device's weights, gradient
accumulators ("acc") and every layer's gradient buffers ("dw") together,
which an arena must hold when every layer's gradients stay live until the
job's end beside the accumulators. The arena must be smaller than that by
at least half the gradients of every layer but the largest (those its
backward program writes), which only reuse makes room for; prints the figures
and whether it is.

Usage: grad_reuse.py PLAN.json RP_RUN_STDERR DEVICE
"""
import json
import re
import sys

DTYPE_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4}

plan = json.load(open(sys.argv[1]))
device = int(sys.argv[3])
held = {"w": 0, "acc": 0, "dw": 0}
for b in plan["buffers"]:
    if b.get("device", -1) != device:
        continue
    kind = b.get("name", "").split(" ")[0]
    kind = "w" if re.fullmatch(r"w\d+", kind) else kind
    if kind in held:
        n = DTYPE_BYTES[b["dtype"]]
        for d in b.get("shape", []):
            n *= d
        held[kind] += n
sizes = {}
for b in plan["buffers"]:
    n = DTYPE_BYTES.get(b["dtype"], 1)
    for d in b.get("shape", []):
        n *= d
    sizes[len(sizes)] = n
# Each layer's gradient buffers: those its backward program writes.
written = {}
for p in plan["programs"]:
    name = p["name"].split(" slot")[0]
    if name.startswith(("start-grads", "add-grads")):
        continue
    name = name.removesuffix(".rest").removesuffix(".recompute")
    for call in p["calls"]:
        for i in call["outputs"]:
            b = plan["buffers"][i]
            if b.get("device", -1) == device and \
                    b.get("name", "").startswith("dw"):
                written.setdefault(name, set()).add(i)
layers = [sum(sizes[i] for i in bs) for bs in written.values()]
line = re.search(r"device buffers per device: ([0-9. ]+) KiB",
                 open(sys.argv[2]).read())
arena = float(line.group(1).split()[device]) * 1024
together = sum(held.values())
room = (held["dw"] - max(layers, default=0)) / 2
print(f"device {device}: weights {held['w']} B, accumulators {held['acc']} B, "
      f"every layer's gradients {held['dw']} B in {len(layers)} layers; "
      f"arena {arena:.0f} B; reused: {arena + room < together}")
