# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t | FileCheck %s

# GPT-OSS through both ONNX exporters: transformers 5.24's GptOssForCausalLM
# (a biased router, top-k then softmax; experts with `x @ W` stacks, biases
# and a clamped SwiGLU whose gate and up are interleaved columns; attention
# sinks; sliding and full attention layers), a tiny config from a config
# object with distinct random weights and swiglu_limit 0.1, so that the
# clamps cut many of these small activations (docs/moe.md, "GPT-OSS").
# TorchScript (opset 17) exports the eager expert loop, dynamo (opset 18)
# the batched_mm experts; rp-import maps both to what rp.trace writes for
# the block (rp.moe.route softmax = after, grouped matmuls by the stacks
# and by the biases, rp.min/rp.max for the clamps). Per exporter
# (bench/families.py's check): the step-0 loss within 1e-4 of PyTorch's,
# every gradient by its named_parameters() name within 1e-4 (the stacks,
# the expert and router biases and the sinks included), 2 devices bitwise
# equal to 1 (loss and gradients). The TorchScript export keeps only the
# experts its example input routes to, so the test first checks that the
# example routes to all of them (otherwise rp-import refuses the block,
# error-moe-stacked-missing.onnxtext).

import sys
from pathlib import Path

import torch
import transformers as T

here = Path(__file__).resolve().parent
sys.path.insert(0, str(here.parents[1] / "bench"))
import families  # noqa: E402
import hf_models  # noqa: E402  (families puts Inputs/ on the path)
import rp  # noqa: E402
import tiny_gpt  # noqa: E402

out = Path(sys.argv[1])
torch.manual_seed(0)
lm = T.GptOssForCausalLM(T.GptOssConfig(
    vocab_size=families.VOCAB, hidden_size=32, intermediate_size=48,
    num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
    max_position_embeddings=64, head_dim=8, num_local_experts=4,
    num_experts_per_tok=2, sliding_window=4, swiglu_limit=0.1))
lm.config.use_cache = False
lm.eval()
model = tiny_gpt.make_distinct(hf_models.LogitsOnly(lm))
tokens, labels = tiny_gpt.batch(vocab=families.VOCAB, b=families.M, s=16)

# The experts each layer's router picks for the export's example input.
routed = []
hooks = [layer.mlp.router.register_forward_hook(
    lambda m, i, o: routed.append(set(o[2].flatten().tolist())))
    for layer in lm.model.layers]
with torch.no_grad():
    model(tokens[:1])
for h in hooks:
    h.remove()
print("the example routes to every expert:",
      all(r == set(range(4)) for r in routed))

ref = families.reference(model, tokens, labels)
for path in ("torchscript", "dynamo"):
    where = out / path
    where.mkdir(parents=True, exist_ok=True)
    cell = families.check_path(path, model, ref, tokens, labels, where)
    ops = ""
    src = where / f"{path}.onnx"
    if src.exists() and cell["reason"] is None:
        mlir = where / f"{path}.mlir"
        rp.run_tool("rp-import", [str(src), "-o", str(mlir)])
        text = mlir.read_text()
        ops = (f", {text.count('softmax = after')} routes softmax = after, "
               f"{text.count('rp.moe.grouped_matmul ')} grouped matmuls, "
               f"{text.count(' sinks(')} attentions with sinks")
    print(f"gpt_oss/{path}: loss {cell['loss']}, grads {cell['grads']} "
          f"({cell['detail']}), 2 devices bitwise {cell['bitwise']}{ops}"
          + (f": {cell['reason']}" if cell["reason"] else ""))

# CHECK: the example routes to every expert: True
# CHECK: gpt_oss/torchscript: loss True, grads True (37 of 37 gradients by name within 0.0001 {{.*}}), 2 devices bitwise True, 2 routes softmax = after, 8 grouped matmuls, 2 attentions with sinks{{$}}
# CHECK: gpt_oss/dynamo: loss True, grads True (37 of 37 gradients by name within 0.0001 {{.*}}), 2 devices bitwise True, 2 routes softmax = after, 8 grouped matmuls, 2 attentions with sinks{{$}}
