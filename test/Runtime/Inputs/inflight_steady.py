"""A plan with one pass in flight (rp-compile --passes-in-flight 1) timed
twice: rp-compile's predicted steady step (the compiler's continuous
layout with one buffer slot: a pass staged once the pass before has run
its epilogue) and the sim device's continuous async run of the exported
plan, which reads the count from the plan, on RoundPipe's simulator inputs
for one model (bench/roundpipe_sim.py builds them) with the stages given.
Prints both, whether they agree within 1 %, and the step with two passes
in flight for comparison.

    inflight_steady.py SRC_ROOT MODEL STAGES
"""
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(sys.argv[1]) / "bench"))
import roundpipe_sim as rs  # noqa: E402

name, stages = sys.argv[2:4]
with tempfile.TemporaryDirectory() as tmp:
    graph, hw, measured = rs.inputs(tmp, name)
    steps = {}
    for passes in ("1", "2"):
        plan = Path(tmp) / f"p{passes}.rpplan"
        out = subprocess.run(
            [str(rs.BIN / "rp-compile"), str(graph), "-o", str(plan),
             "--devices", str(rs.G), "--microbatches", str(rs.M), "--hw",
             str(hw), "--measured", str(measured), "--stages", stages,
             "--dtype", "f16", "--passes-in-flight", passes],
            capture_output=True, text=True, check=True)
        summary = out.stdout + out.stderr
        compiler = float(re.search(r"predicted step ([0-9.]+) ms", summary)[1])
        sim = subprocess.run(
            [str(rs.BIN / "rp-run"), str(plan), "--backend", "sim", "--async",
             "--measured", str(measured), "--no-loss-scaling"],
            capture_output=True, text=True, check=True).stdout
        steps[passes] = (compiler,
                         float(re.search(r"^step_ms (\S+)", sim, re.M)[1]))
    compiler, step = steps["1"]
    print(f"{name} 1 pass in flight: sim {step:.0f} ms, compiler "
          f"{compiler:.0f} ms, within 1%: {abs(step / compiler - 1) <= 0.01}")
    print(f"{name} 2 passes in flight: sim {steps['2'][1]:.0f} ms, compiler "
          f"{steps['2'][0]:.0f} ms")
