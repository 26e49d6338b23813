"""What bench/paper.py needs to print a claim with its range (issue 32).

- host_variants(base): the rtx4090 profile (or its as-built form) with the
  host assumptions a user cannot see from the card, at their two ends and
  in the middle: host DRAM 100 / 200 / 300 GB/s, 4 / 1 / 1 GPUs behind one
  PCIe 4.0 x16 uplink (25 GB/s), the optimizer at 30 / 58 / 100 GB/s (58:
  bench/adamw_vs_torch.py on the development machine). Every term only
  slows a run as it shrinks, so the low end is the slowest.
- kernel_ideal(model): RoundPipe's simulator on its measured kernel times
  (bench/roundpipe_sim.py's inputs): 8 GPUs busy but for its async bubble,
  each at 4 x 2048 tokens per sum of a microbatch's layer times (forward,
  recompute, backward; the LM head's forward and backward). It has no
  host: what a kernel-only model predicts, never a win.
- measured_times(model): those kernel times as a measured profile
  (docs/hardware-profiles.md), for rp-compile and the sim.
"""

import json
from pathlib import Path

from roundpipe_sim import MODELS

SIM_NAME = {"qwen3-1.7b": "1.7b", "llama-3.1-8b": "8b", "qwen3-32b": "32b",
            "gpt-oss-20b": "20b", "qwen3-235b-a22b": "235b"}
TOKENS = 4 * 2048  # the microbatch RoundPipe's per-layer times are for

HOST_ENDS = (  # label, host DRAM GB/s, GPUs per uplink, optimizer GB/s
    ("low", 100, 4, 30),
    ("mid", 200, 1, 58),
    ("high", 300, 1, 100),
)
UPLINK_GBPS = 25  # a PCIe 4.0 x16 switch uplink, at what pinned copies reach


def host_variants(base, tmp, tag):
    """Writes the three host variants of profile JSON `base`; returns
    [(label, path)]."""
    out = []
    for label, dram, per_uplink, opt in HOST_ENDS:
        p = json.loads(json.dumps(base))
        p["name"] = f"{p['name']}-{label}"
        p["host_dram_gbps"] = dram
        p["gpus_per_link"] = per_uplink
        p["uplink_gbps"] = UPLINK_GBPS
        p["optimizer_gbps"] = opt
        path = Path(tmp) / f"{tag}.{label}.json"
        path.write_text(json.dumps(p))
        out.append((label, path))
    return out


def assumptions():
    return ", ".join(f"{label}: host DRAM {dram} GB/s, {per} GPU(s) per "
                     f"{UPLINK_GBPS} GB/s uplink, optimizer {opt} GB/s"
                     for label, dram, per, opt in HOST_ENDS)


def microbatch_ms(model):
    layers, fwd, bwd, hfwd, hbwd = MODELS[SIM_NAME[model]][:5]
    return layers * (2 * fwd + bwd) + hfwd + hbwd


def kernel_ideal(model, gpus=8):
    async_bubble = MODELS[SIM_NAME[model]][9]
    return gpus * (1 - async_bubble / 100) * TOKENS / (
        microbatch_ms(model) / 1e3)


def one_gpu_kernels(model):
    """RoundPipe's 1-GPU tokens/s if only its kernels took time."""
    return TOKENS / (microbatch_ms(model) / 1e3)


def measured_times(model, path):
    layers, fwd, bwd, hfwd, hbwd = MODELS[SIM_NAME[model]][:5]
    times = [{"name": "embed", "forward_ms": 0, "backward_ms": 0}]
    times += [{"name": f"layers.{i}", "forward_ms": fwd, "backward_ms": bwd}
              for i in range(layers)]
    times.append({"name": "head", "forward_ms": hfwd, "backward_ms": hbwd})
    Path(path).write_text(json.dumps({"layers": times}))
    return path


def verdict(low, high, published):
    if low > published:
        return "ahead"
    if high < published:
        return "behind"
    return "level (the range spans it)"
