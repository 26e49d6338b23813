"""Compiles MODEL.mlir for a budget where one pass fits and two do not.

Usage: one_pass_budget.py RP_OPT TWO.mlir MODEL.mlir OUT.mlir PIPELINE_OPTIONS

Reads one pass's planned peaks from TWO.mlir (compiled with the profile's
budget, two passes in flight), and compiles MODEL.mlir again with
budget-gib at 1.2x the largest peak: one pass fits, two copies of the
arenas (2x the largest with renamed devices) do not. Prints the budget.
"""
import re
import subprocess
import sys


def main(rp_opt, two, model, out, options):
    text = open(two).read()
    peaks = [int(x) for x in
             re.search(r"peak_bytes = array<i64: ([^>]*)>", text)
             .group(1).split(",")]
    gib = 1.2 * max(peaks) / (1 << 30)
    subprocess.run([rp_opt, model,
                    f"--rp-train-pipeline={options} budget-gib={gib:.12g}",
                    "-o", out], check=True)
    print(f"budget {int(gib * (1 << 30))} bytes, one pass's peak "
          f"{max(peaks)} bytes")


if __name__ == "__main__":
    main(*sys.argv[1:6])
