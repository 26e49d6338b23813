# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t | FileCheck %s

# Mixture-of-experts routers that take the top-k of the router logits and
# then the softmax of the k they keep (GraniteMoE; Cohere2-MoE with its
# default expert_selection_fn "softmax"), as opposed to Mixtral's softmax
# then top-k. rp-import maps that routing, from both ONNX exporters
# (TorchScript opset 17 with the eager experts, dynamo opset 18 with the
# batched_mm ones), to rp.moe.route softmax = after: the weights are the
# softmax of the k chosen logits, so the router weight's gradient flows
# through those k as in PyTorch. (Cohere2-MoE's TorchScript export was
# invalid twice, one exporter bug: its rotary's repeat_interleave(dim=-1)
# on a rank-3 table turned the model's shared -1 constant into 2, so its
# attention reshaped to 2 heads and its TopK took axis 2 of the rank-2
# router logits; bench/families.py's check registers rp.onnx_symbolics, whose
# repeat_interleave leaves the constant alone, and its experts map as the
# eager loop behind a router imported op by op.) Tiny
# configs built from config objects,
# distinct random weights; per path (bench/families.py's check): the step-0
# loss within 1e-4 of PyTorch's, every gradient by its named_parameters()
# name within 1e-4, 2 devices bitwise equal to 1. rp.trace is checked too.

import sys
from pathlib import Path

import transformers as T

here = Path(__file__).resolve().parent
sys.path.insert(0, str(here.parents[1] / "bench"))
import families  # noqa: E402
import hf_models  # noqa: E402  (families puts Inputs/ on the path)
import rp  # noqa: E402
import tiny_gpt  # noqa: E402

out = Path(sys.argv[1])
SMALL = dict(vocab_size=families.VOCAB, hidden_size=32, intermediate_size=48,
             num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=64)


def granitemoe():
    return T.GraniteMoeForCausalLM(T.GraniteMoeConfig(
        num_local_experts=4, num_experts_per_tok=2, **SMALL))


def cohere2_moe():
    # 4 key/value heads: with 2, TorchScript's export of its attention
    # fails in torch's own shape inference (an Expand).
    return T.Cohere2MoeForCausalLM(T.Cohere2MoeConfig(
        num_experts=4, num_experts_per_tok=2, head_dim=8, sliding_window=8,
        bos_token_id=1, eos_token_id=2, **{**SMALL, "num_key_value_heads": 4}))


tokens, labels = tiny_gpt.batch(vocab=families.VOCAB, b=families.M, s=16)
for name, build in (("granitemoe", granitemoe),
                    ("cohere2_moe", cohere2_moe)):
    import torch
    torch.manual_seed(0)
    lm = build()
    lm.config.use_cache = False
    lm.eval()
    model = tiny_gpt.make_distinct(hf_models.LogitsOnly(lm))
    ref = families.reference(model, tokens, labels)
    for path in families.PATHS:
        where = out / name
        where.mkdir(parents=True, exist_ok=True)
        cell = families.check_path(path, model, ref, tokens, labels, where)
        src = where / (f"{path}.onnx" if path != "trace" else "trace.mlir")
        routes = ""
        if path != "trace" and src.exists() and cell["reason"] is None:
            mlir = where / f"{path}.mlir"
            rp.run_tool("rp-import", [str(src), "-o", str(mlir)])
            text = mlir.read_text()
            routes = (f", {text.count('rp.moe.route ')} routes, "
                      f"{text.count('softmax = after')} softmax = after")
        print(f"{name}/{path}: loss {cell['loss']}, grads {cell['grads']} "
              f"({cell['detail']}), 2 devices bitwise {cell['bitwise']}"
              f"{routes}" + (f": {cell['reason']}" if cell["reason"] else ""))

# CHECK: granitemoe/trace: loss True, grads True ({{[0-9]+}} of {{[0-9]+}} gradients by name within 0.0001 {{.*}}), 2 devices bitwise True{{$}}
# CHECK: granitemoe/torchscript: loss True, grads True ({{.*}}), 2 devices bitwise True, 2 routes, 2 softmax = after{{$}}
# CHECK: granitemoe/dynamo: loss True, grads True ({{.*}}), 2 devices bitwise True, 2 routes, 2 softmax = after{{$}}
# CHECK: cohere2_moe/trace: loss True, grads True ({{.*}}), 2 devices bitwise True{{$}}
# CHECK: cohere2_moe/torchscript: loss True, grads True ({{.*}}), 2 devices bitwise True, 2 routes, 2 softmax = after{{$}}
# CHECK: cohere2_moe/dynamo: loss True, grads True ({{.*}}), 2 devices bitwise True, 2 routes, 2 softmax = after{{$}}
