"""rp's partitioner against exhaustive search, on models too big for the
unit tests.

Usage: python3 bench/partition_vs_exhaustive.py [--hw rtx4090]
           [--devices 4] [--seq 2048]

Llama-like shapes from rp.shapes with 7 and 8 decoder layers (9 and 10
rp layers with the embedding and the head), costed on the profile: the
estimated round-robin step of rp's partition and of the best of every
partition (rp-print-partition partitioner=exhaustive), their gap, and how
long each search took.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
from rp import shapes  # noqa: E402

RP_OPT = os.environ.get("RP_OPT", str(ROOT / "build/bin/rp-opt"))


def search(path, partitioner, args):
    start = time.perf_counter()
    out = subprocess.run(
        [RP_OPT, str(path), "--rp-attach-loss",
         "--rp-print-partition=partitioner=%s hw=%s devices=%d"
         % (partitioner, args.hw, args.devices), "-o", os.devnull],
        check=True, capture_output=True, text=True).stdout
    took = time.perf_counter() - start
    step = float(re.search(r"step_ms=([0-9.e+-]+)", out).group(1))
    stages = re.search(r"^stages=(\S+)", out, re.M).group(1)
    return step, stages, took


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hw", default="rtx4090")
    parser.add_argument("--devices", type=int, default=4)
    parser.add_argument("--seq", type=int, default=2048)
    args = parser.parse_args()
    print(f"hw={args.hw} devices={args.devices} batch=1 seq={args.seq} bf16")
    with tempfile.TemporaryDirectory() as tmp:
        for layers in (7, 8):
            shape = shapes.Shape(layers, 2048, 16, 8, 128, 6144, 32000, False,
                                 True)
            path = Path(tmp) / f"l{layers}.mlir"
            path.write_text(shapes.build(shape, 1, args.seq, "bf16"))
            rp_ms, rp_stages, rp_s = search(path, "rp", args)
            ex_ms, ex_stages, ex_s = search(path, "exhaustive", args)
            print(f"{layers + 2} layers: rp {rp_ms:.2f} ms ({rp_stages}, "
                  f"{rp_s:.2f} s)  exhaustive {ex_ms:.2f} ms ({ex_stages}, "
                  f"{ex_s:.1f} s)  gap {100 * (rp_ms / ex_ms - 1):.2f}%")


if __name__ == "__main__":
    main()
