# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t | FileCheck %s

# What rp.trace cannot map ends in an rp.TraceError naming the op, the
# module path and what to do, never in a Python exception from inside rp:
# DeepSeek-V3 once ended in "TypeError: object of type 'Fused' has no
# len()" inside the MoE probe; a handler that meets an argument form it did
# not foresee is an "unsupported form" naming the op.

import os
import sys
from pathlib import Path

import torch
import transformers as T

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import hf_models  # noqa: E402
import rp  # noqa: E402

out = Path(sys.argv[1])
tokens = torch.randint(0, hf_models.VOCAB, (1, 16))


def attempt(what, model):
    try:
        rp.trace(model, (tokens,), out / what)
        print(what, "traced")
    except rp.TraceError as err:
        print(what, "TraceError:", err)
        print(what, f"op={err.op} module={err.module_path}")


cfg = T.DeepseekV3Config(
    vocab_size=hf_models.VOCAB, hidden_size=32, intermediate_size=48,
    moe_intermediate_size=16, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=4, n_routed_experts=4, num_experts_per_tok=2,
    n_group=2, topk_group=1, first_k_dense_replace=1, kv_lora_rank=16,
    q_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8,
    max_position_embeddings=64)
torch.manual_seed(0)
attempt("deepseek_v3", hf_models.LogitsOnly(T.DeepseekV3ForCausalLM(cfg).eval()))
# The MoE routing maps (python/rp/_moe_grouped.py); the MLA attention's
# writes into slices of its keys do not.
# CHECK: deepseek_v3 TraceError: rp.trace: unsupported op aten.copy_.default in module 'lm.model.layers.0.self_attn' (DeepseekV3Attention); rp has no writes into a view
# CHECK-SAME: torch.cat
# CHECK: deepseek_v3 op=aten.copy_.default module=lm.model.layers.0.self_attn


def broken(e, n):
    raise IndexError("tuple index out of range")


handlers = sys.modules["rp.trace"]._HANDLERS
saved, handlers["silu"] = handlers["silu"], broken
try:
    attempt("llama", hf_models.make("llama"))
finally:
    handlers["silu"] = saved
# CHECK: llama TraceError: rp.trace: unsupported form of aten.silu.default in module 'lm.model.layers.0.mlp.act_fn'
# CHECK-SAME: IndexError: tuple index out of range
# CHECK: llama op=aten.silu.default module=lm.model.layers.0.mlp.act_fn
