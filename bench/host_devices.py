"""The same training steps on 1 and on 4 host devices, side by side.

Usage: .venv/bin/python bench/host_devices.py [--threads N] [--steps 8]
           [--devices 4] [--microbatches 5]

A GPT-2-style model exported by torch.onnx (4 layers, width 256, 3.7 M
parameters, microbatch 4 x 128 tokens) compiled twice with the same
microbatch count: for one device and, with RoundPipe's round-robin
schedule, for --devices host devices. Both run --sync with the same thread
budget and the same global batch; prints the best step of each, the ratio
(4 devices / 1 device: the executor's cost of queues, events and copies on
a machine whose cores the devices share), and whether the per-step losses
are bitwise identical (they must be: DESIGN.md's equivalence contract).

Then continuous execution, in both optimizer modes: the 4-device plan with
a barrier after every step (--step-barrier, the executor's order before
continuous execution), with one pass in flight (--passes-in-flight 1: a
pass starts once the one before has finished), with two passes sharing
one copy of the device arenas (--arena-copies 1: a device takes up the
next pass once its own part of the pass before is done) and with a copy
each (steps overlap fully, devices renamed pass by pass), side by side on
the same machine; tokens/s from the mean step time after the first
(rp-run's "mean ... after the first"), and every loss bitwise the
1-device one of the same mode.
"""

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
from forward_vs_ort import export  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def run(bin_dir, plan, tmp, args, extra, mode="--sync"):
    out = subprocess.run(
        [str(bin_dir / "rp-run"), str(plan), "--input",
         f"tokens={tmp / 'tokens.npy'}", "--labels", str(tmp / "labels.npy"),
         "--steps", str(args.steps), mode, "--threads", str(args.threads)]
        + extra, check=True, capture_output=True, text=True)
    best = float(re.search(r"best step ([0-9.]+) ms", out.stderr).group(1))
    return best, out.stdout, out.stderr


def mean_step(stderr):
    return float(re.search(r"mean ([0-9.]+) ms after the first",
                           stderr).group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--devices", type=int, default=4)
    parser.add_argument("--microbatches", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of each side of the continuous comparison")
    args = parser.parse_args()
    bin_dir = ROOT / "build/bin"
    m = args.microbatches
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        tokens, _ = export(tmp / "gpt.onnx", 4, 256, 128, 4, vocab=4096,
                           return_model=True)
        tokens = tokens.repeat(m, 1)
        np.save(tmp / "tokens.npy", tokens.numpy())
        np.save(tmp / "labels.npy", torch.roll(tokens, -1, 1).numpy())
        plans = {}
        for g in (1, args.devices):
            plans[g] = tmp / f"g{g}.rpplan"
            c = subprocess.run(
                [str(bin_dir / "rp-compile"), str(tmp / "gpt.onnx"), "-o",
                 str(plans[g]), "--devices", str(g), "--microbatches", str(m)],
                check=True, capture_output=True, text=True)
            print(c.stderr.strip())
        one, one_out, _ = run(bin_dir, plans[1], tmp, args, [])
        many, many_out, many_err = run(bin_dir, plans[args.devices], tmp, args,
                                       [])
        tokens_per_step = tokens.numel()
        print(f"threads={args.threads} microbatches={m} "
              f"global batch {tokens.shape[0]} x {tokens.shape[1]}")
        print(f"  1 device : best step {one:8.1f} ms "
              f"({tokens_per_step / one * 1e3:8.0f} tokens/s)")
        print(f"  {args.devices} devices: best step {many:8.1f} ms "
              f"({tokens_per_step / many * 1e3:8.0f} tokens/s)")
        print(f"  ratio {args.devices} devices / 1 device: {many / one:.3f}")
        print("  per-step losses bitwise identical: "
              + ("yes" if one_out == many_out else "NO"))
        for line in many_err.splitlines():
            if re.search(r"device \d+:", line):
                print("  " + line)
        print(f"continuous execution, {args.devices} devices, "
              f"{args.steps} steps (tokens/s from the mean step after the "
              "first):")
        for mode in ("--async", "--sync"):
            _, ref, _ = run(bin_dir, plans[1], tmp, args, [], mode)
            # Alternated, the median of --repeat runs each: other load on
            # the machine hits both alike.
            variants = (("barrier", ["--step-barrier"]),
                        ("one pass", ["--passes-in-flight", "1"]),
                        ("one copy", ["--arena-copies", "1"]),
                        ("continuous", ["--arena-copies", "2"]))
            times = {name: [] for name, _ in variants}
            same = {name: True for name, _ in variants}
            for _ in range(args.repeat):
                for name, extra in variants:
                    _, out, err = run(bin_dir, plans[args.devices], tmp, args,
                                      extra, mode)
                    times[name].append(mean_step(err))
                    same[name] = same[name] and out == ref
            before = float(np.median(times["barrier"]))
            print(f"  {mode[2:]:5} (median of {args.repeat}):")
            for name, _ in variants:
                ms = float(np.median(times[name]))
                print(f"    {name:10}: {ms:8.1f} ms/step "
                      f"({tokens_per_step / ms * 1e3:8.0f} tokens/s), "
                      f"{before / ms:.3f}x the barrier's, losses bitwise the "
                      f"1-device ones: " + ("yes" if same[name] else "NO"))

if __name__ == "__main__":
    main()
