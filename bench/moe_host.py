"""The host's time in RoundPipe's MoE expert loop, per MoE layer, measured
with PyTorch eager on this machine's CPU (issue 32: the held-out MoE
point's host dispatch term, the `moe_host_us` profile field).

Usage: .venv-torch2/bin/python bench/moe_host.py [--repeats 20]

RoundPipe's MoE presets (reference/roundpipe.md, "MoE presets") replace
the expert block by a sort-by-expert loop: route (top-k), sort the tokens
by expert, read the per-expert token counts back to the host (a device
sync, in the forward only: the recompute replays them), then one Python
iteration per expert slicing its tokens and running its gated MLP. Its
235B run puts LoRA (r=32) on every expert's projections (PEFT's
all-linear), so each projection is base + B(A(x)) x scale.

This times that loop's host work with tensors so small (hidden 16,
2 tokens per expert) that each kernel's arithmetic is negligible: what
remains is Python, the dispatcher and autograd, per MoE layer, for the
forward (no grad), the recompute (grad on, counts replayed) and the
backward, for GPT-OSS-20B (32 experts, top-4, no LoRA: RoundPipe's 20B
run trains every weight) and Qwen3-235B-A22B (128 experts, top-8, LoRA).
On a GPU each kernel call adds the CUDA launch's host cost (a few us,
not measured here: no GPU), so these are lower bounds on the host's time.

Whether the GPU waits for it depends on the device work per expert: the
sync empties the GPU's queue once per forward; after it the GPU idles
for as long as the host's loop is ahead of it. bench/paper.py's held-out
table charges the range: the sync alone (the first expert's host work)
up to the whole loop's host time (every expert host-bound).
"""

import argparse
import statistics
import time

import torch

CASES = {  # experts, top-k, LoRA rank (0: none)
    "gpt-oss-20b": (32, 4, 0),
    "qwen3-235b-a22b": (128, 8, 32),
}
H, F = 16, 16


class Linear(torch.nn.Module):
    """A projection as PEFT's LoRA layer runs it (or plain)."""

    def __init__(self, i, o, r):
        super().__init__()
        self.base = torch.nn.Linear(i, o, bias=False)
        self.base.weight.requires_grad_(r == 0)
        self.a = torch.nn.Linear(i, r, bias=False) if r else None
        self.b = torch.nn.Linear(r, o, bias=False) if r else None

    def forward(self, x):
        y = self.base(x)
        if self.a is not None:
            y = y + self.b(self.a(x)) * 0.5
        return y


class Expert(torch.nn.Module):
    def __init__(self, r):
        super().__init__()
        self.gate = Linear(H, F, r)
        self.up = Linear(H, F, r)
        self.down = Linear(F, H, r)

    def forward(self, x):
        return self.down(torch.nn.functional.silu(self.gate(x)) * self.up(x))


class Block(torch.nn.Module):
    def __init__(self, experts, k, r):
        super().__init__()
        self.k = k
        self.router = torch.nn.Linear(H, experts, bias=False)
        self.experts = torch.nn.ModuleList(Expert(r) for _ in range(experts))

    def forward(self, x, counts=None):
        weights, chosen = torch.topk(self.router(x).softmax(-1), self.k)
        flat = chosen.flatten()
        order = flat.argsort()
        if counts is None:
            # The host reads the counts: on a GPU, a device sync.
            counts = torch.bincount(flat, minlength=len(self.experts))
            counts = counts.tolist()
        tokens = x.repeat_interleave(self.k, 0)[order]
        outs, start = [], 0
        for e, n in enumerate(counts):
            if n:
                outs.append(self.experts[e](tokens[start:start + n]))
            start += n
        y = torch.cat(outs)
        scaled = y * weights.flatten()[order].unsqueeze(-1)
        out = torch.zeros(x.shape[0] * self.k, H).index_copy(0, order, scaled)
        return out.view(x.shape[0], self.k, H).sum(1), counts


def per_layer(experts, k, r, repeats):
    torch.manual_seed(0)
    block = Block(experts, k, r)
    x = torch.randn(experts * 2 // k, H)
    fwd, rec, bwd = [], [], []
    for i in range(repeats + 3):
        t0 = time.perf_counter()
        with torch.no_grad():
            _, counts = block(x)
        t1 = time.perf_counter()
        xg = x.clone().requires_grad_(True)
        y, _ = block(xg, counts)
        t2 = time.perf_counter()
        y.sum().backward()
        t3 = time.perf_counter()
        if i >= 3:
            fwd.append(t1 - t0)
            rec.append(t2 - t1)
            bwd.append(t3 - t2)
    return [statistics.median(v) * 1e6 for v in (fwd, rec, bwd)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print("model            experts  forward_us  recompute_us  backward_us  "
          "per_expert_us (mean of the three)")
    for name, (experts, k, r) in CASES.items():
        f, c, b = per_layer(experts, k, r, args.repeats)
        print(f"{name:16s} {experts:7d} {f:11.0f} {c:13.0f} {b:12.0f}  "
              f"{(f + c + b) / 3 / experts:8.1f}")


if __name__ == "__main__":
    main()
