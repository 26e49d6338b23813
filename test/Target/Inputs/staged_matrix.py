"""Compiles staged plans of MODEL for a matrix of schedules, devices,
microbatches, recompute grains and compute types, and checks each with
plan_races.py (through flatc's JSON rendering of the plan).

Usage: staged_matrix.py RP-COMPILE MODEL.onnx OUTDIR
"""
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
schema = os.path.join(here, "..", "..", "..", "contract", "schema", "plan.fbs")
compiler, model, out = sys.argv[1:4]
configs = []
for g in (1, 2, 3, 4):
    for m in (1, g + 1, g + 3):
        for s in ("round-robin", "1f1b", "gpipe"):
            configs.append((s, g, m, ""))
configs = configs[::2]
configs += [("round-robin", 4, 5, "layer bf16"), ("1f1b", 3, 6, ""),
            ("gpipe", 2, 5, ""), ("interleaved-1f1b", 2, 4, ""),
            ("looped-bfs", 2, 3, ""),
            # Forward outputs and saved inputs in separate downloads.
            ("round-robin", 2, 3, "stages=fwd:2,1;bwd:1,1,1,1"),
            ("round-robin", 2, 3, "layer stages=fwd:2,1;bwd:1,1,1,1"),
            # The fused tail as two jobs taking alternate microbatches.
            ("round-robin", 1, 5, "tail-jobs=2 stages=fwd:2;bwd:2,1,1"),
            ("round-robin", 3, 5, "tail-jobs=2 stages=fwd:2;bwd:2,1,1"),
            ("round-robin", 4, 6, "tail-jobs=2 layer bf16 stages=fwd:1;bwd:3,1")]
configs = list(dict.fromkeys(configs))
failed = 0
for s, g, m, extra in configs:
    name = "%s G=%d M=%d%s" % (s, g, m, " " + extra if extra else "")
    plan = os.path.join(out, "p.rpplan")
    args = [compiler, model, "-o", plan, "--devices", str(g),
            "--microbatches", str(m), "--schedule", s]
    if "layer" in extra:
        args += ["--recompute", "layer"]
    if "bf16" in extra:
        args += ["--dtype", "bf16"]
    if "tail-jobs=" in extra:
        args += ["--tail-jobs", extra.split("tail-jobs=")[1].split()[0]]
    if "stages=" in extra:
        args += ["--stages", extra.split("stages=")[1].split()[0]]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode:
        print("%s: compile failed: %s" % (name, r.stderr.strip()))
        failed += 1
        continue
    subprocess.run(["flatc", "--json", "--raw-binary", "--strict-json", "-o",
                    out, schema, "--", plan], check=True)
    r = subprocess.run([sys.executable, os.path.join(here, "plan_races.py"),
                        os.path.join(out, "p.json")],
                       capture_output=True, text=True)
    print("%s: %s" % (name, r.stdout.strip().splitlines()[0] if r.stdout else r.stderr))
    failed += r.returncode != 0
print("%d plans, %d failed" % (len(configs), failed))
