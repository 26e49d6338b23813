"""host_interpreters (issue 32): the model of a framework whose device
threads share one Python interpreter (RoundPipe's GIL). A small MoE plan on
four devices whose expert loop's host work per routing (moe_host_us) is far
longer than its kernels, timed by the sim continuously with every device's
loop on its own thread (host_interpreters absent), on one interpreter, and
on as many as there are devices; then the exported plan's predicted job
times against the sim's pass behind a barrier, on one interpreter.

Usage: one_interpreter.py PLAN_DIR GRAPH PROFILE.json (tools from $RP_BIN)"""
import json
import subprocess
import sys

from profile_runs import BIN, ProfileRuns

US = 5000
runs = ProfileRuns(*sys.argv[1:4], moe_host_us=US)
write, compile_for = runs.write, runs.compile_for


def sim(plan, hw, extra=()):
    return runs.sim(plan, hw, extra)[0]


own, one, four = (write("own"), write("one", host_interpreters=1),
                  write("four", host_interpreters=4))
plan = compile_for(own)
desc = json.loads(subprocess.run([str(BIN / "rp-run"), str(plan),
                                   "--describe=json"], check=True,
                                  capture_output=True, text=True).stdout)
routes = sum(sum(c["op"] in ("moe_route", "moe_route_grad")
                 for c in desc["programs"][j["program"]]["calls"])
             for j in desc["jobs"] if j["kind"] == "run")
serial = routes * US / 1e3
a, b, c = sim(plan, own), sim(plan, one), sim(plan, four)
print(f"routings per step {routes}, their host work {serial:.0f} ms")
# Each device's thread runs its own loop: the loops overlap across the
# devices, and the step is shorter than their sum.
print(f"own threads: step below the loops' sum: {a['step_ms'] < serial}, "
      f"interpreter figure: {'interpreter_busy_pct' in a}")
# One interpreter: no two loops at once, so a step is at least their sum,
# and the interpreter is busy for nearly all of it.
print(f"one interpreter: step at least the loops' sum: "
      f"{b['step_ms'] >= serial * (1 - 1e-9)}, slower than own threads: "
      f"{b['step_ms'] > 1.5 * a['step_ms']}, busy over 90 %: "
      f"{b['interpreter_busy_pct'] > 90}")
# As many interpreters as devices: each loop alone again.
print(f"four interpreters: the own threads' step: "
      f"{abs(c['step_ms'] - a['step_ms']) < 1e-6 * a['step_ms']}")

# The exported plan's predicted job times (rp-compile on the one-
# interpreter profile) and the sim's pass behind a barrier agree.
plan1 = compile_for(one)
desc1 = json.loads(subprocess.run([str(BIN / "rp-run"), str(plan1),
                                    "--describe=json"], check=True,
                                   capture_output=True, text=True).stdout)
predicted = max(j["predicted_start_ms"] + j["predicted_ms"]
                for j in desc1["jobs"])
jobs = sim(plan1, one, ("--step-barrier",))["jobs_ms"]
own_jobs = sim(plan1, own, ("--step-barrier",))["jobs_ms"]
print(f"predicted jobs vs sim within 1 %: "
      f"{abs(predicted - jobs) <= 0.01 * jobs}, slower than own threads: "
      f"{jobs > own_jobs}")
