"""Checks how a staged plan's weight gradients leave the devices
(rp-run --describe=json on stdin): every layer's accumulators are added to
by one program of that layer ("start-grads L" / "add-grads L", run right
after the layer's backward), every per-layer download ("GRAD sN L") waits
for that layer's last add, in its stage job's last microbatch, and copies
exactly that program's accumulators, and every gradient the host receives
is downloaded once. Prints the counts."""
import json
import sys

plan = json.load(sys.stdin)
jobs, programs, buffers = plan["jobs"], plan["programs"], plan["buffers"]
recorder = {}
for i, job in enumerate(jobs):
    for e in job.get("records", []):
        recorder.setdefault(e, i)
last_mb = {}
for job in jobs:
    if job.get("kind", "run") == "run" and job.get("queue") == "compute":
        stage = job.get("stage", 0)
        last_mb[stage] = job.get("microbatch", 0)


def outputs(program):
    return sorted(b for call in programs[program]["calls"]
                  for b in call.get("outputs", []))


per_layer, after_add, problems = 0, 0, []
written = {}
for i, job in enumerate(jobs):
    for c in job.get("copies", []):
        if buffers[c["dst"]].get("device", -1) == -1 and \
                buffers[c["dst"]].get("name", "") == "grad":
            written[c["dst"]] = written.get(c["dst"], 0) + 1
    label = job.get("label", "")
    if not label.startswith("GRAD ") or len(label.split()) < 3:
        continue
    per_layer += 1
    layer = label.split(" ", 2)[2]
    adds = [recorder[e] for e in job.get("waits", []) if e in recorder]
    ok = False
    for a in adds:
        run = jobs[a]
        name = programs[run.get("program", 0)]["name"]
        if name.split(" ", 1)[1:] != [layer] or \
                run.get("microbatch", 0) != last_mb[run.get("stage", 0)]:
            continue
        srcs = sorted(c["src"] for c in job.get("copies", []))
        ok = srcs == outputs(run.get("program", 0))
    if ok:
        after_add += 1
    else:
        problems.append(label)
once = all(n == 1 for n in written.values())
print(f"per-layer downloads {per_layer}, after their layer's last add "
      f"{after_add}, gradients {len(written)} each downloaded once: {once}")
for p in problems:
    print("wrong:", p)
