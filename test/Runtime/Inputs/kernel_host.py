"""kernel_host_us (issue 32): the host's work issuing each kernel call, run
beside the kernels (a framework's eager dispatch: Python, its dispatcher,
autograd, before each launch). A small dense plan on four devices, timed
by the sim with that work shorter than every call's kernel (hidden: the
step as without it), far longer (host-bound: each program takes its calls'
issue work), on one interpreter every device shares (RoundPipe's GIL: a
step at least every call's issue work in a row), and as an unknown with a
range; the exported plan's predicted jobs against the sim's pass behind a
barrier; the layer costs the partitioner reads. Launches are counted as
rp's cuda device makes them (SPEC): on a mixture-of-experts graph a MoE
call issues several, and the sim, the predicted jobs and the layer costs
must charge each.

Usage: kernel_host.py PLAN_DIR GRAPH PROFILE.json (tools from $RP_BIN)"""
import json
import os
import re
import subprocess
import sys

from profile_runs import BIN, ProfileRuns

runs = ProfileRuns(*sys.argv[1:4])
graph, profile = sys.argv[2], runs.profile
write, compile_for, sim, describe = (runs.write, runs.compile_for, runs.sim,
                                     runs.describe)
SLOW_US = 500


# The launches per call of rp's cuda device (runtime/lib/cuda/CudaMoE*.cu),
# written out as the spec the tools are held to: a reshape (a view) none;
# a grouped matmul its offsets, tile plan, batched GEMM and finish; a
# dispatch its rank, offsets, place and move; a weight gradient its
# zeroing, offsets, problems and CUTLASS's GEMM; a combine gradient two
# zeroings, a check, the rows and, weighted, the weights; others one.
SPEC = {"reshape": 0, "moe_dispatch": 4, "moe_grouped_matmul": 4,
        "moe_grouped_matmul_wgrad": 4}


def launches(call):
    if call["op"] == "moe_combine_grad":
        return 4 + call["ints"][0]
    return SPEC.get(call["op"], 1)


launch_us = json.loads(profile.read_text())["launch_us"]
base = write("base")
hidden = write("hidden", kernel_host_us=launch_us / 2)
slow = write("slow", kernel_host_us=SLOW_US)
one = write("one", kernel_host_us=SLOW_US, host_interpreters=1)
ranged = write("ranged", kernel_host_us=launch_us / 2,
               unknown={"kernel_host_us": [launch_us / 2, SLOW_US]})
plan = compile_for(base)
desc = describe(plan)
calls = sum(launches(c)
            for j in desc["jobs"] if j["kind"] == "run"
            for c in desc["programs"][j["program"]]["calls"])
beyond = sum(launches(c) - 1 for j in desc["jobs"] if j["kind"] == "run"
             for c in desc["programs"][j["program"]]["calls"]
             if c["op"].startswith("moe_"))
serial = calls * SLOW_US / 1e3
a, _ = sim(plan, base)
h, _ = sim(plan, hidden)
s, _ = sim(plan, slow)
o, err = sim(plan, one)
print(f"calls per step {calls}, their issue work {serial:.0f} ms; launches "
      f"beyond one a MoE call: {beyond}")
# Every call's kernel takes at least launch_us, so half of it issued beside
# each changes nothing.
print(f"hidden: the step without it: "
      f"{abs(h['step_ms'] - a['step_ms']) <= 1e-9 * a['step_ms']}")
# Host-bound on each device's own thread: slower, but the devices' issue
# work overlaps, so the step is below every call's issue work in a row.
print(f"host-bound, own threads: slower: {s['step_ms'] > 2 * a['step_ms']}, "
      f"below the calls' sum: {s['step_ms'] < serial}, interpreter figure: "
      f"{'interpreter_busy_pct' in s}")
# One interpreter: no two devices issue at once.
print(f"one interpreter: step at least the calls' sum: "
      f"{o['step_ms'] >= serial * (1 - 1e-9)}, slower than own threads: "
      f"{o['step_ms'] > s['step_ms']}, busy over 90 %: "
      f"{o['interpreter_busy_pct'] > 90}")
print("assumes: " + re.search(r"\d+ us of host work issuing each kernel, "
                              r"beside it on [^,;]*", err).group(0))
# An unknown with a range: the slow end is the host-bound profile's step,
# the fast end the hidden one's.
r, err = sim(plan, ranged)
print(f"range: slow end the host-bound step: "
      f"{abs(r['step_ms_high'] - s['step_ms']) <= 1e-9 * s['step_ms']}, "
      f"fast end the hidden one: "
      f"{abs(r['step_ms_low'] - h['step_ms']) <= 1e-9 * h['step_ms']}")

# The exported plan's predicted job times (rp-compile on each profile) and
# the sim's pass behind a barrier agree, on own threads and on one
# interpreter.
for hw in (slow, one):
    p = compile_for(hw)
    d = describe(p)
    predicted = max(j["predicted_start_ms"] + j["predicted_ms"]
                    for j in d["jobs"])
    jobs = sim(p, hw, ("--step-barrier",))[0]["jobs_ms"]
    print(f"{hw.stem}: predicted jobs vs sim within 1 %: "
          f"{abs(predicted - jobs) <= 0.01 * jobs}")

# The layer costs: a forward of k launches takes k x 0.5 ms once
# host-bound, k as the plan's program of that layer launches them.
forward = sum(launches(c) for p in desc["programs"]
              if p["name"] == "layers.0 slot0" for c in p["calls"])
layers = subprocess.run(
    [str(BIN / "rp-opt"), graph, f"--rp-print-layer-costs=hw={slow}", "-o",
     os.devnull], check=True, capture_output=True, text=True).stdout
for line in layers.splitlines():
    if '"layers.0"' in line:
        fwd = float(re.search(r"forward_ms=([0-9.e+-]+)", line).group(1))
        print(f"layer costs: forward {forward} launches x {SLOW_US} us: "
              f"{abs(fwd - forward * SLOW_US / 1e3) < 1e-9 * fwd}")
