"""Data parallelism across processes on this machine: 1 vs 2 vs 3 ranks,
side by side.

Usage: .venv/bin/python bench/multibox.py [--steps 6] [--threads 1]

A GPT-2-style model exported by torch.onnx (4 layers, width 256, 3.7 M
parameters: 15 MB of f32 gradients summed per step) compiled for 2 host
devices and 2 microbatches of 4 x 128 tokens. Each rank trains its own
global batch (weak scaling: W ranks train W times the tokens of one step),
the ranks on loopback over Gloo (launch_ranks.py, torchrun's variables).
Prints, per world size, the job's tokens/s (W x a rank's tokens over the
mean step after the first, the slowest rank's) and the all-reduce's share
of a step: the trace's "all-reduce" span (from the step's first gradient
sum to its loss sum; it overlaps the pipeline) over the step time. The
machine's cores are shared by all ranks, so this measures the
communicator's overhead, not the scaling of separate boxes (the sim's
prediction in docs/multi-box.md is for those).
"""

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
from forward_vs_ort import export  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    bin_dir = ROOT / "build/bin"
    launch = ROOT / "test/Runtime/Inputs/launch_ranks.py"
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        export(tmp / "gpt.onnx", 4, 256, 128, 4, vocab=4096,
               return_model=True)
        plan = tmp / "g.rpplan"
        subprocess.run([str(bin_dir / "rp-compile"), str(tmp / "gpt.onnx"),
                        "-o", str(plan), "--devices", "2", "--microbatches",
                        "2"], check=True, capture_output=True)
        tokens_per_rank = 2 * 4 * 128
        base = None
        print(f"steps={args.steps} threads/rank={args.threads}, "
              f"{tokens_per_rank} tokens per rank per step")
        for world in (1, 2, 3):
            out = tmp / f"w{world}"
            cmd = [str(bin_dir / "rp-run"), str(plan), "--sync", "--steps",
                   str(args.steps), "--threads", str(args.threads),
                   "--watchdog-ms", "120000", "--trace",
                   str(tmp / f"w{world}.trace.json")]
            if world == 1:
                err = subprocess.run(cmd, check=True, capture_output=True,
                                     text=True).stderr
                errs = [err]
            else:
                # Rank 0's trace at the name given (the others' beside it).
                subprocess.run([sys.executable, str(launch), str(world),
                                str(out), "--"] + cmd, check=True)
                errs = [open(f"{out}.{r}.err").read() for r in range(world)]
            mean = max(float(re.search(r"mean ([0-9.]+) ms after the first",
                                       e).group(1)) for e in errs)
            share = 0.0
            if world > 1:
                trace = json.load(open(tmp / f"w{world}.trace.json"))
                events = trace["traceEvents"] if isinstance(
                    trace, dict) else trace
                spans = [e["dur"] / 1e3 for e in events
                         if e.get("name") == "all-reduce" and "dur" in e]
                if spans:
                    share = sum(spans[1:]) / max(len(spans) - 1, 1) / mean
            tps = world * tokens_per_rank / (mean / 1e3)
            base = base or tps
            print(f"  {world} rank(s): mean step {mean:8.1f} ms, "
                  f"{tps:8.0f} tokens/s ({tps / base:.2f}x of 1 rank), "
                  f"all-reduce {share * 100:5.1f}% of a step")


if __name__ == "__main__":
    main()
