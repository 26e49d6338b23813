# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t | FileCheck %s

# A 4-bit base for a mixture-of-experts LoRA fine-tune (issue 36): a tiny
# transformers Qwen3-MoE, traced, compiled with all-linear adapters and
# --quantize-base nf4 (rp.compile(quantize_base=...)). The attention
# projections and the expert stacks are stored as NF4 blobs, the router
# keeps its dtype although it has an adapter (PEFT's all-linear takes
# mlp.gate too; the update's add once hid it from rp-quantize-base); two
# sync steps on 1, 2 and 4 host devices give bitwise the same losses, near
# the unquantized base's and not equal to them.

import json
import os
import subprocess
import sys
from pathlib import Path

import torch
import transformers as T

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import hf_models  # noqa: E402
import rp  # noqa: E402
import tiny_gpt  # noqa: E402
from rp.tools import find_tool  # noqa: E402

out = Path(sys.argv[1])
M = 4
tokens, labels = tiny_gpt.batch(vocab=hf_models.VOCAB, b=M, s=16)
torch.manual_seed(0)
lm = T.Qwen3MoeForCausalLM(T.Qwen3MoeConfig(
    vocab_size=hf_models.VOCAB, hidden_size=64, intermediate_size=96,
    num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
    max_position_embeddings=64, experts_implementation="eager",
    moe_intermediate_size=64, num_experts=4, num_experts_per_tok=2,
    norm_topk_prob=True, decoder_sparse_step=1, head_dim=16))
lm.config.use_cache = False
model = tiny_gpt.make_distinct(hf_models.LogitsOnly(lm.eval()))
src = rp.trace(model, (tokens[:1],), out / "trace")


def plan(tag, devices, **flags):
    return rp.compile(src, out / f"{tag}.rpplan", devices=devices,
                      microbatches=M, lora_rank=4, lora_alpha=8, **flags)


def weights(p):
    desc = json.loads(subprocess.run(
        [find_tool("rp-run"), str(p), "--describe=json"], check=True,
        capture_output=True, text=True).stdout)
    return {b["weight"]["param"]: b["dtype"] for b in desc["buffers"]
            if b.get("weight") and not b["weight"].get("trainable")}


def losses(p):
    return list(rp.train(p, {"input_ids": tokens}, labels, steps=2,
                         sync=True))


full = plan("bf16", 1)
nf4 = {g: plan(f"nf4-{g}", g, quantize_base="nf4") for g in (1, 2, 4)}
kept, stored = weights(full), weights(nf4[1])
routers = sorted(n for n in stored if n.endswith("mlp.gate.weight"))
experts = sorted(n for n in stored if ".experts." in n)
attention = sorted(n for n in stored if "self_attn" in n and "proj" in n)
print(f"routers kept: {len(routers)}, "
      f"{all(stored[n] == kept[n] != 'u8' for n in routers)}; "
      f"expert stacks quantized: {len(experts)}, "
      f"{all(stored[n] == 'u8' for n in experts)}; attention quantized: "
      f"{len(attention)}, {all(stored[n] == 'u8' for n in attention)}")
# CHECK: routers kept: 2, True; expert stacks quantized: 4, True; attention quantized: 8, True

base = losses(full)
one = losses(nf4[1])
print("2 and 4 devices bitwise 1:",
      all(losses(nf4[g]) == one for g in (2, 4)))
# CHECK: 2 and 4 devices bitwise 1: True
near = all(abs(a - b) <= 0.05 * abs(b) for a, b in zip(one, base))
print(f"nf4 within 5 % of the unquantized base: {near}, and not equal: "
      f"{one != base}")
print(f"losses nf4 {one}, unquantized {base}", file=sys.stderr)
# CHECK: nf4 within 5 % of the unquantized base: True, and not equal: True
