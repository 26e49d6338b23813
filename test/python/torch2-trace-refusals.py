# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t | FileCheck %s

# What rp.trace cannot map ends in an rp.TraceError naming the op, the
# module path and what to do, never in a Python exception from inside rp:
# DeepSeek-V3's MoE routing (sigmoid scores, a correction bias,
# group-limited top-k) once ended in "TypeError: object of type 'Fused' has
# no len()"; a handler that meets an argument form it did not foresee is an
# "unsupported form" naming the op.

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
# CHECK: deepseek_v3 TraceError: rp.trace: module 'lm.model.layers.1.mlp' (DeepseekV3MoE) has a router and 4 experts
# CHECK-SAME: e_score_correction_bias
# CHECK-SAME: To train the model
# CHECK: deepseek_v3 op=moe routing module=lm.model.layers.1.mlp


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
