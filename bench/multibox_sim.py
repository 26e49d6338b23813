"""Predicted scaling of data parallelism across boxes of 8 x RTX 4090.

Usage: .venv/bin/python bench/multibox_sim.py [--models qwen3-1.7b,...]

For each model shape (rp.shapes, sequence 2048, f16, paper.py's batches)
one training plan for 8 RTX 4090s (round-robin, 10 microbatches per pass,
paper.py's passes per step), timed by the sim (rp-run --backend sim) and
then for 2 and 4 boxes over 25 GbE and 100 GbE (--boxes, --network): each
box sums its f32 gradients with the others as they land (ring all-reduce),
and what is left after the step's jobs lengthens the step (sync mode;
async hides the sums behind the next step up to a step's length). Prints
per row
the all-reduce of one step, its exposed part, tokens/s of all boxes and the
scaling efficiency (tokens/s over boxes x one box's); where it falls well
below 1, scaling stops on that network.
"""

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = ROOT / "build/bin"
sys.path.insert(0, str(ROOT / "python"))
from rp import shapes  # noqa: E402

RUNS = {"qwen3-1.7b": (512, 4), "llama-3.1-8b": (256, 2),
        "qwen3-32b": (128, 2)}
G, M = 8, 10


def sim(plan, passes, extra):
    r = subprocess.run([str(BIN / "rp-run"), str(plan), "--backend", "sim",
                        "--accumulate", str(passes), "--steps", "4", "--sync"]
                       + extra,
                       capture_output=True, text=True, check=True)
    return {k: v for k, v in (line.split(None, 1)
                              for line in r.stdout.splitlines() if " " in line)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="qwen3-1.7b,llama-3.1-8b")
    args = parser.parse_args()
    print("| model | boxes | network | all-reduce ms | exposed ms | step ms "
          "| tokens/s | efficiency |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            batch, passes = RUNS[name]
            b = max(1, round(batch / (M * passes)))
            graph = Path(tmp) / f"{name}.mlir"
            graph.write_text(shapes.build(shapes.SHAPES[name], b, 2048, "f16"))
            plan = Path(tmp) / f"{name}.rpplan"
            for grain in ("stage", "layer"):
                r = subprocess.run(
                    [str(BIN / "rp-compile"), str(graph), "-o", str(plan),
                     "--devices", str(G), "--microbatches", str(M), "--hw",
                     "rtx4090", "--dtype", "f16", "--recompute", grain],
                    capture_output=True, text=True)
                if not r.returncode:
                    break
            r.check_returncode()
            one = sim(plan, passes, [])
            print(f"| {name} | 1 | - | - | - | {float(one['step_ms']):.0f} | "
                  f"{float(one['tokens_per_s']):.0f} | 1 |")
            for net in ("25gbe", "100gbe"):
                for boxes in (2, 4):
                    d = sim(plan, passes, ["--boxes", str(boxes),
                                           "--network", net])
                    print(f"| {name} | {boxes} | {net} | "
                          f"{float(d['allreduce_ms']):.0f} | "
                          f"{float(d['allreduce_exposed_ms']):.0f} | "
                          f"{float(d['boxes_step_ms']):.0f} | "
                          f"{float(d['boxes_tokens_per_s']):.0f} | "
                          f"{float(d['scaling_efficiency']):.2f} |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
