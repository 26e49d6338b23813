# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t | FileCheck %s

# Token slices of mixture-of-experts models (issue 35): transformers'
# Qwen3-MoE and Mixtral (tiny configs from config objects: two layers,
# four experts, top-2, four query heads over two key/value heads, 48
# tokens, traced with rp.trace). Routing is per token, so a slice routes
# its own tokens as the whole sequence does: one step of the sliced plan on
# the host gives the unsliced plan's loss and every weight gradient within
# 1e-5 of the gradient's largest magnitude, on 1 and 2 devices (the tail's
# sweep, forward jobs that keep keys and backward jobs that sum key
# gradients), in 2 even slices and in 20 + 16 + 12 tokens; 2 devices equal
# 1 bit for bit; 1 device's is PyTorch's within 1e-4; and every sliced plan
# passes plan_races.py.

import json
import sys
from pathlib import Path

import torch
import transformers as T

sys.path.insert(0, str(Path(__file__).parent / "Inputs"))
from token_slices_check import S, VOCAB, check_slicings, logits_only  # noqa: E402

import rp  # noqa: E402

out = Path(sys.argv[1])
CONFIGS = ((1, ""), (2, "fwd:2;bwd:2,2"))


def make(name):
    torch.manual_seed(0)
    common = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                  num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=S,
                  num_experts_per_tok=2)
    if name == "qwen3-moe":
        return logits_only(T.Qwen3MoeForCausalLM(T.Qwen3MoeConfig(
            head_dim=8, num_experts=4, moe_intermediate_size=16,
            decoder_sparse_step=1, norm_topk_prob=True, **common)))
    return logits_only(T.MixtralForCausalLM(T.MixtralConfig(
        num_local_experts=4, **common)))


def routes(plan):
    """Whether the plan has routing calls (the experts run as MoE kernels,
    not as a dense layer)."""
    desc = json.loads(rp.run_tool("rp-run", [str(plan), "--describe=json"])
                      .stdout)
    calls = sum(c["op"] == "moe_route" for p in desc["programs"]
                for c in p["calls"])
    return f"routes {calls > 0}"


for name in ("qwen3-moe", "mixtral"):
    check_slicings(name, make(name), out, CONFIGS, one_device=routes)

# CHECK: qwen3-moe 1 devices, slices 2: loss within 1e-5 True, 25 gradients within 1e-5 True, reordered True, no races True, routes True, PyTorch's within 1e-4 True True
# CHECK: qwen3-moe 1 devices, slices 20,16,12: loss within 1e-5 True, 25 gradients within 1e-5 True, reordered True, no races True, routes True, PyTorch's within 1e-4 True True
# CHECK: qwen3-moe 2 devices, slices 2: loss within 1e-5 True, 25 gradients within 1e-5 True, reordered True, no races True, bitwise 1 device's True
# CHECK: qwen3-moe 2 devices, slices 20,16,12: loss within 1e-5 True, 25 gradients within 1e-5 True, reordered True, no races True, bitwise 1 device's True
# CHECK: mixtral 1 devices, slices 2: loss within 1e-5 True, 21 gradients within 1e-5 True, reordered True, no races True, routes True, PyTorch's within 1e-4 True True
# CHECK: mixtral 1 devices, slices 20,16,12: loss within 1e-5 True, 21 gradients within 1e-5 True, reordered True, no races True, routes True, PyTorch's within 1e-4 True True
# CHECK: mixtral 2 devices, slices 2: loss within 1e-5 True, 21 gradients within 1e-5 True, reordered True, no races True, bitwise 1 device's True
# CHECK: mixtral 2 devices, slices 20,16,12: loss within 1e-5 True, 21 gradients within 1e-5 True, reordered True, no races True, bitwise 1 device's True
