"""One training step of rp against PyTorch on the CPU: same model, batch,
labels, optimizer (AdamW) and thread count, both on OpenBLAS.

Usage: .venv/bin/python bench/train_vs_torch.py [--threads N] [--steps 5]

Two GPT-2-style models exported by torch.onnx (opset 17): a small one
(4 layers, width 256, 3.7 M parameters) and a ~30 M-parameter one
(8 layers, width 512, vocabulary 8192); batch 4 x 128 tokens. rp: rp-compile
(training plan: loss, autodiff with recompute) and rp-run --sync, best step
of --steps. PyTorch: forward, cross-entropy, backward and
torch.optim.AdamW(foreach=True) in eager mode, best of --steps. Prints the
times and the ratio rp / torch.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
from forward_vs_ort import export  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def bench(bin_dir, threads, steps, layers, width, vocab, seq=128, batch=4):
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        tokens, model = export(tmp / "gpt.onnx", layers, width, seq, batch,
                               vocab=vocab, return_model=True)
        labels = torch.roll(tokens, -1, 1)
        np.save(tmp / "tokens.npy", tokens.numpy())
        np.save(tmp / "labels.npy", labels.numpy())
        subprocess.run([str(bin_dir / "rp-compile"), str(tmp / "gpt.onnx"),
                        "-o", str(tmp / "gpt.rpplan")], check=True,
                       capture_output=True)
        run = subprocess.run(
            [str(bin_dir / "rp-run"), str(tmp / "gpt.rpplan"), "--input",
             f"tokens={tmp / 'tokens.npy'}", "--labels",
             str(tmp / "labels.npy"), "--steps", str(steps), "--sync",
             "--threads", str(threads)],
            check=True, capture_output=True, text=True)
        rp_ms = float(re.search(r"best step ([0-9.]+) ms", run.stderr).group(1))
        params = sum(p.numel() for p in model.parameters())

    torch.set_num_threads(threads)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    best = float("inf")
    for _ in range(steps):
        t0 = time.perf_counter()
        opt.zero_grad()
        logits = model(tokens)
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, vocab), labels.reshape(-1))
        loss.backward()
        opt.step()
        best = min(best, time.perf_counter() - t0)
    return params, rp_ms, best * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args()
    bin_dir = Path(os.environ.get("RP_BIN", ROOT / "build" / "bin"))
    print(f"train_vs_torch: one AdamW training step, batch 4 x 128 tokens, "
          f"{args.threads} threads, best of {args.steps}")
    for name, layers, width, vocab in (("small", 4, 256, 2048),
                                       ("~30M", 8, 512, 8192)):
        params, rp_ms, torch_ms = bench(bin_dir, args.threads, args.steps,
                                        layers, width, vocab)
        print(f"  {name:6s} {params / 1e6:5.1f} M params: rp {rp_ms:9.1f} ms, "
              f"torch {torch_ms:9.1f} ms, ratio rp / torch "
              f"{rp_ms / torch_ms:5.2f}")


if __name__ == "__main__":
    sys.exit(main())
