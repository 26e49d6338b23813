# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t | FileCheck %s

# transformers 5's mixture-of-experts models (the torch-2 venv,
# scripts/torch2-requirements.txt), tiny configs with distinct random
# weights: Qwen3MoeForCausalLM with norm_topk_prob on and off (renormalised
# top-k weights or not), MixtralForCausalLM and Qwen2MoeForCausalLM (a
# shared expert behind a sigmoid gate), and GptOssForCausalLM (a biased
# router, top-k then softmax, biased `x @ W` stacks and a clamped SwiGLU,
# attention sinks), each through both front ends.
# transformers 5 stores each block's experts as two stacked parameters
# ([E, 2F, H] gate-and-up, [E, H, F] down) and routes in a router module
# holding a bare [E, H] weight. rp.trace finds that form by structure
# (python/rp/_moe.py); the TorchScript ONNX export (opset 17, the experts'
# "eager" implementation: the default grouped_mm one calls aten::histc,
# which the exporter cannot write) gathers each expert's slice of the
# stacks at the run-time index of the i-th expert hit, which rp-import
# recognises (docs/moe.md). Both write one grouped matmul by the
# gate-and-up stack. For each, on one device with 4 microbatches the
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
SMALL = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=48,
             num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=64,
             experts_implementation="eager")


def qwen3_moe(norm):
    return T.Qwen3MoeForCausalLM(T.Qwen3MoeConfig(
        moe_intermediate_size=24, num_experts=4, num_experts_per_tok=2,
        norm_topk_prob=norm, decoder_sparse_step=1, head_dim=8, **SMALL))


def mixtral():
    return T.MixtralForCausalLM(T.MixtralConfig(
        num_local_experts=4, num_experts_per_tok=2, **SMALL))


def qwen2_moe():
    return T.Qwen2MoeForCausalLM(T.Qwen2MoeConfig(
        moe_intermediate_size=24, shared_expert_intermediate_size=40,
        num_experts=4, num_experts_per_tok=2, norm_topk_prob=False,
        decoder_sparse_step=1, **SMALL))


def gpt_oss():
    # swiglu_limit 0.1 (7 in the published config) so that the clamps of
    # the experts' SwiGLU cut many of these small activations.
    return T.GptOssForCausalLM(T.GptOssConfig(
        head_dim=8, num_local_experts=4, num_experts_per_tok=2,
        sliding_window=4, swiglu_limit=0.1, **SMALL))


def make(build):
    torch.manual_seed(0)
    lm = build()
    lm.config.use_cache = False
    lm.eval()
    return tiny_gpt.make_distinct(hf_models.LogitsOnly(lm))


print(f"transformers {T.__version__.split('.')[0]}")
for name, build in (("qwen3-moe", lambda: qwen3_moe(True)),
                    ("qwen3-moe-unnormed", lambda: qwen3_moe(False)),
                    ("mixtral", mixtral), ("qwen2-moe", qwen2_moe),
                    ("gpt-oss", gpt_oss)):
    model = make(build)
    ref_loss, ref_grads = tiny_gpt.reference(model, tokens, labels)
    for front in ("onnx", "trace"):
        tag = f"{name}/{front}"
        if front == "onnx":
            src = out / f"{name}.onnx"
            step0.export_onnx(model, {"input_ids": tokens[:1]}, src)
            mlir = out / f"{name}.mlir"
            try:
                rp.run_tool("rp-import", [str(src), "-o", str(mlir)])
            except rp.ToolError as err:
                print(f"{tag}: {err.stderr.strip().splitlines()[0]}")
                continue
        else:
            src = rp.trace(model, (tokens[:1],), out / name)
            mlir = src
        text = Path(mlir).read_text()
        routes = text.count("rp.moe.route ")
        normed = text.count(" normalize :")
        print(f"{tag}: moe ops: {routes} routes ({normed} renormalised), "
              f"{text.count('rp.moe.grouped_matmul ')} grouped matmuls")
        moe_check.check(tag, src, out, inputs, labels, M, ref_loss,
                        ref_grads)

# CHECK:      transformers 5
# CHECK-NEXT: qwen3-moe/onnx: moe ops: 2 routes (2 renormalised), 4 grouped matmuls
# CHECK-NEXT: qwen3-moe/onnx: loss within 1e-4: True
# CHECK-NEXT: qwen3-moe/onnx: gradients 25 of 25 within 1e-4: True
# CHECK-NEXT: qwen3-moe/onnx: 2 devices bitwise: True
# CHECK-NEXT: qwen3-moe/onnx: 4 devices bitwise: True
# CHECK-NEXT: qwen3-moe/trace: moe ops: 2 routes (2 renormalised), 4 grouped matmuls
# CHECK-NEXT: qwen3-moe/trace: loss within 1e-4: True
# CHECK-NEXT: qwen3-moe/trace: gradients 25 of 25 within 1e-4: True
# CHECK-NEXT: qwen3-moe/trace: 2 devices bitwise: True
# CHECK-NEXT: qwen3-moe/trace: 4 devices bitwise: True
# CHECK-NEXT: qwen3-moe-unnormed/onnx: moe ops: 2 routes (0 renormalised), 4 grouped matmuls
# CHECK-NEXT: qwen3-moe-unnormed/onnx: loss within 1e-4: True
# CHECK-NEXT: qwen3-moe-unnormed/onnx: gradients 25 of 25 within 1e-4: True
# CHECK-NEXT: qwen3-moe-unnormed/onnx: 2 devices bitwise: True
# CHECK-NEXT: qwen3-moe-unnormed/onnx: 4 devices bitwise: True
# CHECK-NEXT: qwen3-moe-unnormed/trace: moe ops: 2 routes (0 renormalised), 4 grouped matmuls
# CHECK-NEXT: qwen3-moe-unnormed/trace: loss within 1e-4: True
# CHECK-NEXT: qwen3-moe-unnormed/trace: gradients 25 of 25 within 1e-4: True
# CHECK-NEXT: qwen3-moe-unnormed/trace: 2 devices bitwise: True
# CHECK-NEXT: qwen3-moe-unnormed/trace: 4 devices bitwise: True
# CHECK-NEXT: mixtral/onnx: moe ops: 2 routes (2 renormalised), 4 grouped matmuls
# CHECK-NEXT: mixtral/onnx: loss within 1e-4: True
# CHECK-NEXT: mixtral/onnx: gradients 21 of 21 within 1e-4: True
# CHECK-NEXT: mixtral/onnx: 2 devices bitwise: True
# CHECK-NEXT: mixtral/onnx: 4 devices bitwise: True
# CHECK-NEXT: mixtral/trace: moe ops: 2 routes (2 renormalised), 4 grouped matmuls
# CHECK-NEXT: mixtral/trace: loss within 1e-4: True
# CHECK-NEXT: mixtral/trace: gradients 21 of 21 within 1e-4: True
# CHECK-NEXT: mixtral/trace: 2 devices bitwise: True
# CHECK-NEXT: mixtral/trace: 4 devices bitwise: True
# CHECK-NEXT: qwen2-moe/onnx: moe ops: 2 routes (0 renormalised), 4 grouped matmuls
# CHECK-NEXT: qwen2-moe/onnx: loss within 1e-4: True
# CHECK-NEXT: qwen2-moe/onnx: gradients 35 of 35 within 1e-4: True
# CHECK-NEXT: qwen2-moe/onnx: 2 devices bitwise: True
# CHECK-NEXT: qwen2-moe/onnx: 4 devices bitwise: True
# CHECK-NEXT: qwen2-moe/trace: moe ops: 2 routes (0 renormalised), 4 grouped matmuls
# CHECK-NEXT: qwen2-moe/trace: loss within 1e-4: True
# CHECK-NEXT: qwen2-moe/trace: gradients 35 of 35 within 1e-4: True
# CHECK-NEXT: qwen2-moe/trace: 2 devices bitwise: True
# CHECK-NEXT: qwen2-moe/trace: 4 devices bitwise: True
# CHECK-NEXT: gpt-oss/onnx: moe ops: 2 routes (0 renormalised), 8 grouped matmuls
# CHECK-NEXT: gpt-oss/onnx: loss within 1e-4: True
# CHECK-NEXT: gpt-oss/onnx: gradients 37 of 37 within 1e-4: True
# CHECK-NEXT: gpt-oss/onnx: 2 devices bitwise: True
# CHECK-NEXT: gpt-oss/onnx: 4 devices bitwise: True
# CHECK-NEXT: gpt-oss/trace: moe ops: 2 routes (0 renormalised), 8 grouped matmuls
# CHECK-NEXT: gpt-oss/trace: loss within 1e-4: True
# CHECK-NEXT: gpt-oss/trace: gradients 37 of 37 within 1e-4: True
# CHECK-NEXT: gpt-oss/trace: 2 devices bitwise: True
# CHECK-NEXT: gpt-oss/trace: 4 devices bitwise: True
