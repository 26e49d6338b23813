"""rp-compile's estimate (its predicted steady step, the one the partition
search minimizes) against the sim's steady step of the exported plan, on
layer costs from the graph (no --measured): an rp.shapes model at
microbatch B x 2048, f16, 8 rtx4090s, round-robin with the stages given.
Prints both and whether they agree within the bound (a fraction).

Usage: model_estimate_vs_sim.py MODEL BATCH MICROBATCHES STAGES BOUND
       [rp-compile flags...]  (the tools from $RP_BIN, as lit sets it)"""
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

bin_dir = os.environ["RP_BIN"]
model, batch, micro, stages, bound = sys.argv[1:6]
extra = sys.argv[6:]
with tempfile.TemporaryDirectory() as tmp:
    graph = Path(tmp) / "g.mlir"
    subprocess.run([sys.executable, "-m", "rp.shapes", model, "--batch", batch,
                    "--seq", "2048", "--dtype", "f16", "-o", str(graph)],
                   check=True)
    plan = Path(tmp) / "p.rpplan"
    c = subprocess.run([f"{bin_dir}/rp-compile", str(graph), "-o", str(plan),
                        "--devices", "8", "--microbatches", micro, "--hw",
                        "rtx4090", "--dtype", "f16", "--stages", stages,
                        *extra], capture_output=True, text=True, check=True)
    est = float(re.search(r"predicted step ([0-9.]+) ms", c.stderr).group(1))
    r = subprocess.run([f"{bin_dir}/rp-run", str(plan), "--backend", "sim"],
                       capture_output=True, text=True, check=True)
    sim = float(re.search(r"^step_ms (\S+)", r.stdout, re.M).group(1))
off = est / sim - 1
print(f"{model}: sim {sim:.0f} ms, estimate {est:.0f} ms ({off * 100:+.2f} %),"
      f" within {float(bound):.1%}: {abs(off) <= float(bound)}")
