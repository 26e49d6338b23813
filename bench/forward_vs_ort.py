"""rp's host forward against onnxruntime's CPU forward on the same model,
same input, same thread count.

Usage: .venv/bin/python bench/forward_vs_ort.py [--threads N] [--layers 4]
       [--width 256] [--seq 128] [--batch 4]

Exports a GPT-2-style model with torch.onnx (opset 17), compiles it with
rp-compile --forward-only, and times the best of 20 forwards of each:
rp-run --steps 20 (its own timer, excluding plan loading) and an
onnxruntime session with intra_op_num_threads = N. Prints both times, the
ratio rp / onnxruntime, and the agreement of the two outputs.
"""

import argparse
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def gpt_model(layers, width, seq, vocab=2048):
    """The GPT-2-style model, seeded (torch.manual_seed(0)), in eval mode."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(width)
            self.c_attn = nn.Linear(width, 3 * width)
            self.c_proj = nn.Linear(width, width)
            self.ln_2 = nn.LayerNorm(width)
            self.c_fc = nn.Linear(width, 4 * width)
            self.c_out = nn.Linear(4 * width, width)
            self.heads = width // 64
            self.register_buffer("mask", torch.tril(torch.ones(seq, seq)).bool())

        def forward(self, x):
            b, s, d = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
            q, k, v = (t.view(b, s, self.heads, 64).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(64))
            att = att.masked_fill(~self.mask[:s, :s], float("-inf")).softmax(-1)
            y = (att @ v).transpose(1, 2).reshape(b, s, d)
            x = x + self.c_proj(y)
            return x + self.c_out(nn.functional.gelu(self.c_fc(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, width)
            self.wpe = nn.Embedding(seq, width)
            self.h = nn.ModuleList([Block() for _ in range(layers)])
            self.ln_f = nn.LayerNorm(width)

        def forward(self, tokens):
            x = self.wte(tokens) + self.wpe(
                torch.arange(tokens.shape[1], device=tokens.device))
            for block in self.h:
                x = block(x)
            return self.ln_f(x) @ self.wte.weight.t()

    torch.manual_seed(0)
    return GPT().eval()


def export(path, layers, width, seq, batch, vocab=2048, return_model=False):
    import torch

    model = gpt_model(layers, width, seq, vocab)
    tokens = torch.randint(0, vocab, (batch, seq))
    torch.onnx.export(model, (tokens,), str(path), opset_version=17,
                      do_constant_folding=False, input_names=["tokens"],
                      output_names=["logits"])
    if return_model:
        return tokens, model
    return tokens.numpy()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=4)
    args = ap.parse_args()
    bin_dir = Path(os.environ.get("RP_BIN", ROOT / "build" / "bin"))
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        tokens = export(tmp / "gpt.onnx", args.layers, args.width, args.seq,
                        args.batch)
        np.save(tmp / "tokens.npy", tokens)
        subprocess.run([str(bin_dir / "rp-compile"), str(tmp / "gpt.onnx"),
                        "-o", str(tmp / "gpt.rpplan"), "--forward-only"],
                       check=True, capture_output=True)
        run = subprocess.run(
            [str(bin_dir / "rp-run"), str(tmp / "gpt.rpplan"), "--input",
             f"tokens={tmp / 'tokens.npy'}", "--steps", "20", "--threads",
             str(args.threads), "--dump-outputs", str(tmp / "rp.npy")],
            check=True, capture_output=True, text=True)
        rp_ms = float(re.search(r"best of \d+ steps ([0-9.]+) ms",
                                run.stderr).group(1))

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = args.threads
        opts.inter_op_num_threads = 1
        session = ort.InferenceSession(str(tmp / "gpt.onnx"), opts,
                                       providers=["CPUExecutionProvider"])
        feed = {"tokens": tokens}
        ref = session.run(None, feed)[0]
        best = math.inf
        for _ in range(20):
            t0 = time.perf_counter()
            session.run(None, feed)
            best = min(best, time.perf_counter() - t0)
        ort_ms = best * 1e3
        got = np.load(tmp / "rp.npy")
        err = np.max(np.abs(got - ref)) / np.max(np.abs(ref))

    params = (2048 * args.width + args.seq * args.width +
              args.layers * 12 * args.width * args.width) / 1e6
    print(f"forward_vs_ort: GPT {args.layers} layers, width {args.width}, "
          f"batch {args.batch} x {args.seq} tokens, {params:.1f} M params, "
          f"{args.threads} threads")
    print(f"  rp host forward      {rp_ms:9.2f} ms (best of 20)")
    print(f"  onnxruntime forward  {ort_ms:9.2f} ms (best of 20)")
    print(f"  ratio rp / ort       {rp_ms / ort_ms:9.2f}")
    print(f"  outputs agree to     {err:9.2e} (max|rp - ort| / max|ort|)")


if __name__ == "__main__":
    sys.exit(main())
