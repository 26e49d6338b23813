# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %PYTHON %s %t | FileCheck %s

# transformers' Qwen2MoeForCausalLM (transformers 4.40, pinned in
# scripts/setup.sh; tiny config: 4 experts, top-2, no renormalisation, a
# shared expert behind a sigmoid gate; distinct random weights) through both
# front ends: the TorchScript ONNX export (rp-import recognises the routing,
# docs/moe.md; the shared expert imports as ordinary ops) and rp.trace
# (python/rp/_moe.py). For each, on one device with 4 microbatches the
# step-0 loss and every parameter's gradient equal PyTorch autograd's within
# 1e-4; on 2 and 4 devices in sync mode the losses of 2 steps and the step-0
# gradients are bitwise those of one device.

import os
import sys
from pathlib import Path

import torch
import transformers as T

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import hf_models  # noqa: E402
import moe_check  # noqa: E402
import rp  # noqa: E402
import step0  # noqa: E402
import tiny_gpt  # noqa: E402

out = Path(sys.argv[1])
M = 4
VOCAB = hf_models.VOCAB
tokens, labels = tiny_gpt.batch(vocab=VOCAB, b=M, s=16)
inputs = {"input_ids": tokens}


def qwen2_moe():
    torch.manual_seed(0)
    lm = T.Qwen2MoeForCausalLM(T.Qwen2MoeConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48,
        moe_intermediate_size=24, shared_expert_intermediate_size=40,
        num_experts=4, num_experts_per_tok=2, norm_topk_prob=False,
        decoder_sparse_step=1, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64))
    lm.config.use_cache = False
    lm.eval()
    return tiny_gpt.make_distinct(hf_models.LogitsOnly(lm))


model = qwen2_moe()
ref_loss, ref_grads = tiny_gpt.reference(model, tokens, labels)
for front in ("onnx", "trace"):
    tag = f"qwen2-moe/{front}"
    if front == "onnx":
        src = out / "qwen2-moe.onnx"
        step0.export_onnx(model, {"input_ids": tokens[:1]}, src)
        mlir = out / "qwen2-moe.mlir"
        rp.run_tool("rp-import", [str(src), "-o", str(mlir)])
    else:
        src = rp.trace(model, (tokens[:1],), out / "qwen2-moe")
        mlir = src
    text = Path(mlir).read_text()
    print(f"{tag}: moe ops: {text.count('rp.moe.route ')} routes, "
          f"{text.count('rp.moe.grouped_matmul ')} grouped matmuls")
    moe_check.check(tag, src, out, inputs, labels, M, ref_loss,
                    ref_grads)

# CHECK:      qwen2-moe/onnx: moe ops: 2 routes, 6 grouped matmuls
# CHECK-NEXT: qwen2-moe/onnx: loss within 1e-4: True
# CHECK-NEXT: qwen2-moe/onnx: gradients 55 of 55 within 1e-4: True
# CHECK-NEXT: qwen2-moe/onnx: 2 devices bitwise: True
# CHECK-NEXT: qwen2-moe/onnx: 4 devices bitwise: True
# CHECK-NEXT: qwen2-moe/trace: moe ops: 2 routes, 6 grouped matmuls
# CHECK-NEXT: qwen2-moe/trace: loss within 1e-4: True
# CHECK-NEXT: qwen2-moe/trace: gradients 55 of 55 within 1e-4: True
# CHECK-NEXT: qwen2-moe/trace: 2 devices bitwise: True
# CHECK-NEXT: qwen2-moe/trace: 4 devices bitwise: True
