"""Calibrates profiles/rtx4090.json on Qwen3-1.7B, then predicts the held-out
models with the same numbers.

Usage: python3 bench/calibrate.py [--write]

RoundPipe's artifact (pp-simulate/run.sh, reference/roundpipe.md §1) gives
per-layer times measured on an RTX 4090: forward and backward (recompute
not included) of one decoder layer and of the LM head, per microbatch. The
microbatch is not stated; we take 4 sequences of 2048 tokens:
 - the artifact's per-hop times (1.6 / 3.2 / 4.0 ms, proportional to the
   hidden size) are one download plus one upload of a 4 x 2048 x hidden
   f16 activation at ~21 GB/s;
 - with these per-layer times, 8 GPUs would reach 70.7k tokens/s if never
   idle, and RoundPipe publishes 65.4k at a 4% bubble.
The LM head's forward (2 x 8192 x 2048 x 151936 FLOPs) in 22.07 ms is then
231 TFLOP/s, 1.4 times the 4090's dense f16 rate with f32 accumulation
(165.2 TFLOP/s, the accumulation rp's kernels use: cuBLAS with
CUBLAS_COMPUTE_32F, docs/cuda.md). No f32-accumulate kernel does that, so
the profile keeps the card's real peak and the head is not fitted: a
matmul of the head's size reaches HEAD_SHARE of it (0.85, what tuned
large GEMMs reach on Ada and Hopper, docs/hardware-profiles.md), and the
head's published times stay an outlier the model does not claim to meet
(its -40 % is printed below). The fit moves two numbers of the profile's
op_efficiency: the share of peak a small matmul reaches (the curve's point
at 3.4e10 FLOPs, at most HEAD_SHARE) and attention_grad's share, so that
the decoder layer's forward and backward match. Everything else stays as shipped. Then Llama-3.1-8B, Qwen3-32B and
the mixture-of-experts GPT-OSS-20B are predicted with those numbers,
unchanged, next to their published times:
the error there is the model's, honestly stated.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RP_OPT = os.environ.get("RP_OPT", str(ROOT / "build/bin/rp-opt"))
PROFILE = ROOT / "profiles/rtx4090.json"

# ms per microbatch: layer forward, layer backward, head forward, head
# backward (RoundPipe-artifact pp-simulate/run.sh).
PUBLISHED = {
    "qwen3-1.7b": (7.429, 15.831, 22.0655, 43.707),
    "llama-3.1-8b": (18.50370313, 41.20659375, 37.2255, 74.501),
    "qwen3-32b": (40.5610625, 91.17429688, 54.928, 108.294),
    # Mixture of experts: 32 experts, top-4, timed as grouped GEMMs of one
    # expert's rows each (the matmul curve at one expert's work). The
    # 235B's artifact times are with LoRA, which this graph does not add.
    "gpt-oss-20b": (21.6445625, 81.780875, 44.2925, 86.264),
}
BATCH, SEQ = 4, 2048
HEAD_SHARE = 0.85


def graph(model, out):
    subprocess.run([sys.executable, "-m", "rp.shapes", model, "--batch",
                    str(BATCH), "--seq", str(SEQ), "--dtype", "f16", "-o",
                    str(out)], check=True,
                   env={**os.environ, "PYTHONPATH": str(ROOT / "python")})


def costs(mlir, profile, tmp):
    path = Path(tmp) / "profile.json"
    path.write_text(json.dumps(profile))
    r = subprocess.run([RP_OPT, str(mlir),
                        f"--rp-print-layer-costs=hw={path}", "-o", os.devnull],
                       capture_output=True, text=True, check=True)
    out = r.stdout + r.stderr
    times = []
    for name in ("layers.0", "head"):
        m = re.search(r'layer "%s" .*?forward_ms=([0-9.e+-]+) '
                      r'recompute_ms=[0-9.e+-]+ backward_ms=([0-9.e+-]+)'
                      % re.escape(name), out)
        times += [float(m[1]), float(m[2])]
    return times


def with_fit(base, small, attention_grad):
    p = json.loads(json.dumps(base))
    p["op_efficiency"] = {
        "matmul": {"compute": [[3.4e10, small], [2.5e12, HEAD_SHARE]]},
        "attention_grad": {"compute": attention_grad},
    }
    return p


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true",
                    help="write the fitted numbers into profiles/rtx4090.json")
    args = ap.parse_args()
    base = json.loads(PROFILE.read_text())
    base.pop("op_efficiency", None)
    with tempfile.TemporaryDirectory() as tmp:
        mlir = {m: Path(tmp) / f"{m}.mlir" for m in PUBLISHED}
        for m, path in mlir.items():
            graph(m, path)
        target = PUBLISHED["qwen3-1.7b"]
        best = None
        # A coarse grid, then a fine one around its best point.
        grid = [(s / 100, a / 100) for s in range(20, 86, 4)
                for a in range(10, 71, 10)]
        for _ in range(2):
            for small, ag in grid:
                t = costs(mlir["qwen3-1.7b"], with_fit(base, small, ag), tmp)
                err = abs(t[0] / target[0] - 1) + abs(t[1] / target[1] - 1)
                if best is None or err < best[0]:
                    best = (err, small, ag)
            _, s0, a0 = best
            grid = [(round(s0 + ds / 100, 3), round(a0 + da / 100, 3))
                    for ds in range(-3, 4) for da in range(-8, 9, 2)
                    if 0 < s0 + ds / 100 <= HEAD_SHARE and a0 + da / 100 > 0
                    and a0 + da / 100 <= 1]
        _, small, ag = best
        fitted = with_fit(base, small, ag)
        print(f"fit on qwen3-1.7b (microbatch {BATCH} x {SEQ}, f16): "
              f"matmul share {small} at 3.4e10 FLOPs, {HEAD_SHARE} at "
              f"2.5e12; attention_grad {ag}")
        print(f"{'model':14} {'':6} {'predicted ms':>24} {'published ms':>24}"
              f" {'error':>16}")
        for m, pub in PUBLISHED.items():
            t = costs(mlir[m], fitted, tmp)
            for part, a, b in (("layer", 0, 2), ("head", 2, 4)):
                err = "  ".join(f"{(t[i] / pub[i] - 1) * 100:+6.1f}%"
                                for i in range(a, b))
                print(f"{m:14} {part:6} {t[a]:11.2f} {t[a + 1]:11.2f} "
                      f"  {pub[a]:11.2f} {pub[a + 1]:11.2f}  {err}"
                      + ("" if m == "qwen3-1.7b" else "  (held out)"))
    if args.write:
        profile = json.loads(PROFILE.read_text())
        profile["op_efficiency"] = fitted["op_efficiency"]
        text = json.dumps(profile, indent=2)
        # Numbers and number lists on one line, as the shipped profiles are.
        for _ in range(2):
            text = re.sub(r"\[\s*([^\[\]{}]*?)\s*\]",
                          lambda m: "[" + re.sub(r"\s*\n\s*", " ",
                                                 m[1]) + "]", text)
        text = re.sub(r'\{\s*("[a-z0-9]+": [^{}\n]*?)\s*\}',
                      lambda m: "{" + re.sub(r"\s*\n\s*", " ", m[1]) + "}",
                      text)
        PROFILE.write_text(text + "\n")
        print(f"wrote {PROFILE}")


if __name__ == "__main__":
    main()
