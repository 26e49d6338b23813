"""The host's time to run one dense decoder layer in PyTorch eager, as
RoundPipe's device threads run it, measured on this machine's CPU (issue
32: how busy RoundPipe's one interpreter is with its per-kernel launches,
which its device threads issue holding the GIL).

Usage: .venv-torch2/bin/python bench/layer_host.py [--repeats 20]

transformers' Qwen3 and Llama decoder layers (RoundPipe trains the HF
models; SDPA attention, one kernel as its FlashAttention is) with tensors
so small (hidden 16, 4 tokens) that each kernel's arithmetic is
negligible: what remains is Python, the dispatcher and autograd per layer,
for the forward (no grad), the recompute (grad on) and the backward. On a
GPU each kernel call adds the CUDA launch's host cost (a few us, not
measured here: no GPU), so these are lower bounds on the host's time. The
backward runs in autograd's engine, which releases the GIL for built-in
ops: counting it whole is an upper bound on what holds the interpreter.

It prints, per model, the host time per layer and microbatch and how busy
one interpreter would be with eight GPUs' launches at RoundPipe's layer
times (bench/roundpipe_sim.py's inputs, per 4 x 2048-token microbatch):
8 x host / (forward + recompute + backward). Below 100 % the device
threads run ahead of their GPUs and the launches are hidden: they cannot
pace an 8-GPU step (docs/sim-roundpipe.md, "The model of
RoundPipe at 8 GPUs").
Then the kernels PyTorch launches per layer (ops that compute, counted by
a dispatch mode in a separate pass, views left out) and the host time per
launch. bench/claims.py's LAYER_HOST_US holds the per-layer totals the
model of RoundPipe charges (kernel_host_us: the total over rp's kernel
launches per layer, beside the kernels, on its one interpreter).

The mixture-of-experts models (GPT-OSS-20B, Qwen3-235B-A22B) are timed
without their expert block: RoundPipe replaces it by its sort-by-expert
loop, whose host work bench/moe_host.py measures (moe_host_us, the router
included), so what is timed here is the rest of the layer: attention (the
20B's with its sinks, in transformers' eager path, the one that takes
them), norms and residuals, and for the 235B LoRA r=32 on the attention
projections (PEFT's all-linear, as its run).
"""

import argparse
import statistics
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import GptOssConfig, LlamaConfig, Qwen3Config, Qwen3MoeConfig
from transformers.models.gpt_oss.modeling_gpt_oss import (
    GptOssDecoderLayer, GptOssRotaryEmbedding)
from transformers.models.llama.modeling_llama import (LlamaDecoderLayer,
                                                      LlamaRotaryEmbedding)
from transformers.models.qwen3_moe.modeling_qwen3_moe import (
    Qwen3MoeDecoderLayer, Qwen3MoeRotaryEmbedding)
from transformers.models.qwen3.modeling_qwen3 import (Qwen3DecoderLayer,
                                                      Qwen3RotaryEmbedding)

# RoundPipe's per-layer forward and backward ms (pp-simulate/run.sh,
# bench/roundpipe_sim.py MODELS): forward, backward (its recompute is a
# second forward).
LAYER_MS = {"qwen3-1.7b": (7.429, 15.831), "llama-3.1-8b": (18.504, 41.207),
            "qwen3-32b": (40.561, 91.174),
            "gpt-oss-20b": (21.645, 81.781),
            "qwen3-235b-a22b": (43.016, 58.376)}
CASES = {"qwen3-1.7b": (Qwen3Config, Qwen3DecoderLayer, Qwen3RotaryEmbedding),
         "llama-3.1-8b": (LlamaConfig, LlamaDecoderLayer,
                          LlamaRotaryEmbedding),
         "qwen3-32b": (Qwen3Config, Qwen3DecoderLayer, Qwen3RotaryEmbedding),
         "gpt-oss-20b": (GptOssConfig, GptOssDecoderLayer,
                         GptOssRotaryEmbedding),
         "qwen3-235b-a22b": (Qwen3MoeConfig, Qwen3MoeDecoderLayer,
                             Qwen3MoeRotaryEmbedding)}
# The expert block each MoE layer's stub stands for returns (out, router
# scores) in GPT-OSS, the output alone in Qwen3-MoE; LoRA rank on the
# attention projections.
NO_EXPERTS = {"gpt-oss-20b": (True, 0), "qwen3-235b-a22b": (False, 32)}


class NoExperts(torch.nn.Module):
    """The expert block left out (bench/moe_host.py times RoundPipe's)."""

    def __init__(self, pair):
        super().__init__()
        self.pair = pair

    def forward(self, x):
        return (x, None) if self.pair else x


class LoRA(torch.nn.Module):
    """A frozen projection with PEFT's LoRA beside it (as moe_host.py's)."""

    def __init__(self, base, r):
        super().__init__()
        self.base = base
        self.base.weight.requires_grad_(False)
        self.a = torch.nn.Linear(base.in_features, r, bias=False)
        self.b = torch.nn.Linear(r, base.out_features, bias=False)

    def forward(self, x):
        return self.base(x) + self.b(self.a(x)) * 0.5


class Launches(TorchDispatchMode):
    """Counts the ops that compute (a kernel each on a GPU); views and
    detaches launch none."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not func.is_view and func._schema.name not in (
                "aten::detach", "aten::_unsafe_view", "aten::lift_fresh"):
            self.count += 1
        return func(*args, **(kwargs or {}))


def per_layer(name, repeats):
    config_cls, layer_cls, rope_cls = CASES[name]
    config = config_cls(hidden_size=16, intermediate_size=32,
                        num_attention_heads=2, num_key_value_heads=1,
                        head_dim=8, num_hidden_layers=1, vocab_size=32)
    # GPT-OSS's sinks are taken by its eager attention only.
    config._attn_implementation = ("eager" if name == "gpt-oss-20b"
                                   else "sdpa")
    torch.manual_seed(0)
    layer = layer_cls(config, 0)
    if name in NO_EXPERTS:
        pair, r = NO_EXPERTS[name]
        layer.mlp = NoExperts(pair)
        if r:
            attn = layer.self_attn
            for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
                setattr(attn, proj, LoRA(getattr(attn, proj), r))
    rope = rope_cls(config)
    x = torch.randn(1, 4, 16)
    pos = torch.arange(4).unsqueeze(0)
    emb = rope(x, pos)
    launches = []
    for part in ("forward", "recompute", "backward"):
        mode = Launches()
        if part == "forward":
            with mode, torch.no_grad():
                layer(x, position_embeddings=emb, position_ids=pos)
        elif part == "recompute":
            xg = x.clone().requires_grad_(True)
            with mode:
                y = layer(xg, position_embeddings=emb, position_ids=pos)
        else:
            y = y[0] if isinstance(y, tuple) else y
            with mode:
                y.sum().backward()
        launches.append(mode.count)
    fwd, rec, bwd = [], [], []
    for i in range(repeats + 3):
        t0 = time.perf_counter()
        with torch.no_grad():
            layer(x, position_embeddings=emb, position_ids=pos)
        t1 = time.perf_counter()
        xg = x.clone().requires_grad_(True)
        y = layer(xg, position_embeddings=emb, position_ids=pos)
        y = y[0] if isinstance(y, tuple) else y
        t2 = time.perf_counter()
        y.sum().backward()
        t3 = time.perf_counter()
        if i >= 3:
            fwd.append(t1 - t0)
            rec.append(t2 - t1)
            bwd.append(t3 - t2)
    return [statistics.median(v) * 1e6 for v in (fwd, rec, bwd)], launches


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print("model          forward_us  recompute_us  backward_us  "
          "interpreter busy at 8 GPUs (all / forward and recompute only)")
    launches = {}
    for name in CASES:
        (f, c, b), launches[name] = per_layer(name, args.repeats)
        fwd_ms, bwd_ms = LAYER_MS[name]
        gpu_us = (2 * fwd_ms + bwd_ms) * 1e3
        print(f"{name:16s} {f:8.0f} {c:13.0f} {b:12.0f}  "
              f"{8 * (f + c + b) / gpu_us * 100:5.1f} % / "
              f"{8 * (f + c) / gpu_us * 100:5.1f} %")
        launches[name].append((f + c + b) / sum(launches[name]))
    print("model          launches: forward  recompute  backward  "
          "host us per launch")
    for name, (f, c, b, us) in launches.items():
        print(f"{name:16s} {f:15d} {c:10d} {b:9d}  {us:8.2f}")


if __name__ == "__main__":
    main()
