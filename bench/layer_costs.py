"""Modelled per-layer costs of the dense models of reference/models.md.

Usage: python3 bench/layer_costs.py [--hw rtx4090] [--seq 2048] [--batch 1]

For Qwen3-1.7B, Llama-3.1-8B and Qwen3-32B (graphs from rp.shapes, no
weights) prints, per model: parameters, forward and backward TFLOPs of one
microbatch, the modelled forward + recompute + backward time of a decoder
layer next to the time to upload its weights over PCIe (RoundPipe's
argument for streaming weights: compute must cover the transfer), the stage
lists of RoundPipe's and rp's partitioners on --devices GPUs with their
estimated step times and ratio, and the
time rp-opt takes to verify the graph and cost it, side by side with
verifying alone (the baseline), as a ratio.
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


def timed(args):
    start = time.perf_counter()
    out = subprocess.run(args, check=True, capture_output=True, text=True)
    return time.perf_counter() - start, out.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hw", default="rtx4090")
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--devices", type=int, default=8)
    args = parser.parse_args()
    print(f"hw={args.hw} batch={args.batch} seq={args.seq} dtype=bf16")
    with tempfile.TemporaryDirectory() as tmp:
        for name, shape in shapes.SHAPES.items():
            path = Path(tmp) / f"{name}.mlir"
            path.write_text(shapes.build(shape, args.batch, args.seq, "bf16"))
            base, _ = timed([RP_OPT, path, "--rp-verify-graph", "-o", os.devnull])
            full, out = timed([RP_OPT, path, "--rp-verify-graph",
                               f"--rp-print-layer-costs=hw={args.hw}",
                               "-o", os.devnull])
            rows = {m.group(1): dict(re.findall(r"(\w+)=([0-9.e+-]+)", m.group(2)))
                    for m in re.finditer(r'^layer "([^"]+)" (.*)$', out, re.M)}
            layer, head = rows["layers.0"], rows["head"]
            fwd = sum(int(r["forward_flops"]) for r in rows.values())
            bwd = sum(int(r["backward_flops"]) for r in rows.values())
            step = lambda r: (float(r["forward_ms"]) + float(r["recompute_ms"]) +
                              float(r["backward_ms"]))
            print(f"{name}: params {shapes.param_count(shape) / 1e9:.2f} B, "
                  f"fwd {fwd / 1e12:.1f} TFLOP, bwd {bwd / 1e12:.1f} TFLOP per microbatch")
            print(f"  decoder layer: fwd {float(layer['forward_ms']):.2f} ms, "
                  f"fwd+recompute+bwd {step(layer):.2f} ms, "
                  f"upload {float(layer['upload_ms']):.2f} ms, "
                  f"compute/upload {step(layer) / float(layer['upload_ms']):.2f}")
            print(f"  head: fwd+bwd {float(head['forward_ms']) + float(head['backward_ms']):.2f} ms "
                  f"= {(float(head['forward_ms']) + float(head['backward_ms'])) / (float(layer['forward_ms']) + float(layer['backward_ms'])):.2f} decoder layers")
            for partitioner in ("roundpipe", "rp"):
                took, part = timed([RP_OPT, path, "--rp-print-partition="
                                    f"partitioner={partitioner} hw={args.hw} "
                                    f"devices={args.devices}", "-o", os.devnull])
                lines = part.strip().splitlines()
                sizes = {l.split()[0]: l.split()[1][len("sizes="):]
                         for l in lines[2:5]}
                timing = dict(re.findall(r"(\w+)=([0-9.e+-]+)", lines[5]))
                print(f"  {partitioner} partition on {args.devices} devices: "
                      f"forward {sizes['forward']} | tail {sizes['tail']} | "
                      f"backward {sizes['backward']}")
                print(f"    estimated step {float(timing['step_ms']):.0f} ms over "
                      f"{timing['microbatches']} microbatches, bubble "
                      f"{float(timing['bubble_pct']):.1f}%, partitioning took "
                      f"{took:.2f} s")
                if partitioner == "rp":
                    versus = dict(re.findall(r"(\w+)=([0-9.e+-]+)", lines[6]))
                    print(f"    rp / roundpipe estimated step: {float(versus['ratio']):.3f}")
            print(f"  rp-opt verify+costs {full * 1e3:.0f} ms vs verify alone "
                  f"{base * 1e3:.0f} ms (ratio {full / base:.2f})")


if __name__ == "__main__":
    main()
