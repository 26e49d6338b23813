"""A plan with one pass in flight (rp-compile --passes-in-flight 1), and
one with two passes in flight sharing one copy of the arenas
(--arena-copies 1: a device takes up the next pass once its own part of
the pass before is done), each timed twice: rp-compile's predicted steady
step (the compiler's continuous layout) and the sim device's continuous
async run of the exported plan, which reads the counts from the plan, on
RoundPipe's simulator inputs for one model (bench/roundpipe_sim.py builds
them) with the stages given. Prints both, whether they agree within 1 %,
and the step with a copy of the arenas per pass for comparison.

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
    runs = {"1 pass in flight": ["--passes-in-flight", "1"],
            "2 passes on one copy of the arenas": ["--arena-copies", "1"],
            "2 passes on two copies of the arenas": ["--arena-copies", "2"]}
    for label, flags in runs.items():
        plan = Path(tmp) / f"p{len(steps)}.rpplan"
        out = subprocess.run(
            [str(rs.BIN / "rp-compile"), str(graph), "-o", str(plan),
             "--devices", str(rs.G), "--microbatches", str(rs.M), "--hw",
             str(hw), "--measured", str(measured), "--stages", stages,
             "--dtype", "f16", *flags],
            capture_output=True, text=True, check=True)
        summary = out.stdout + out.stderr
        compiler = float(re.search(r"predicted step ([0-9.]+) ms", summary)[1])
        sim = subprocess.run(
            [str(rs.BIN / "rp-run"), str(plan), "--backend", "sim", "--async",
             "--measured", str(measured), "--no-loss-scaling"],
            capture_output=True, text=True, check=True).stdout
        steps[label] = (compiler,
                         float(re.search(r"^step_ms (\S+)", sim, re.M)[1]))
    for label, (compiler, step) in steps.items():
        print(f"{name} {label}: sim {step:.0f} ms, compiler {compiler:.0f} "
              f"ms, within 1%: {abs(step / compiler - 1) <= 0.01}")
