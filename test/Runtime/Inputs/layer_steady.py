"""A layer-grain plan's steady step timed twice: rp-compile's prediction
(the compiler's continuous layout, whose recompute split follows the grain:
only a layer-grain backward's deepest layer recomputes ahead of the
gradient) and the sim device's continuous async run of the exported plan,
on RoundPipe's simulator inputs for one model (bench/roundpipe_sim.py
builds them) with the stages given. Prints both and whether they agree
within 0.5 % (0.86 % apart while the compiler ran a layer-grain stage's
whole recompute ahead of the gradient).

With GRAINS (`layer,stage,...`, one per backward stage after the tail)
the plan is mixed: each backward stage recomputes at its own grain
(--recompute-stages), the layer-grain ones uploading their saved inputs.

    layer_steady.py SRC_ROOT MODEL STAGES [GRAINS]
"""
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(sys.argv[1]) / "bench"))
import roundpipe_sim as rs  # noqa: E402

name, stages = sys.argv[2:4]
grains = sys.argv[4] if len(sys.argv) > 4 else ""
with tempfile.TemporaryDirectory() as tmp:
    graph, hw, measured = rs.inputs(tmp, name)
    plan = Path(tmp) / "layer.rpplan"
    out = subprocess.run(
        [str(rs.BIN / "rp-compile"), str(graph), "-o", str(plan),
         "--devices", str(rs.G), "--microbatches", str(rs.M), "--hw",
         str(hw), "--measured", str(measured), "--stages", stages,
         "--dtype", "f16"] +
        (["--recompute-stages", grains] if grains else
         ["--recompute", "layer"]),
        capture_output=True, text=True, check=True)
    summary = out.stdout + out.stderr
    compiler = float(re.search(r"predicted step ([0-9.]+) ms", summary)[1])
    grain = re.search(r"(\w+)-grain recompute", summary)[1]
    sim = subprocess.run(
        [str(rs.BIN / "rp-run"), str(plan), "--backend", "sim", "--async",
         "--measured", str(measured), "--no-loss-scaling"],
        capture_output=True, text=True, check=True).stdout
    step = float(re.search(r"^step_ms (\S+)", sim, re.M)[1])
    off = step / compiler - 1
    print(f"{name} {grain} grain: sim {step:.0f} ms, compiler {compiler:.0f} "
          f"ms ({100 * off:+.2f} %), within 0.5%: {abs(off) <= 0.005}")
