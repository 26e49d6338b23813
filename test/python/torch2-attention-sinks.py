# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t | FileCheck %s

# GPT-OSS's attention sinks unpacked (transformers' eager attention: the
# scores and a sink logit per head concatenated, the row maximum
# subtracted, a softmax, the sink column dropped) fuse into one
# rp.attention with the sinks operand a layer (rp-fuse-attention,
# FuseAttentionSinks.cpp), through rp.trace and through both ONNX
# exporters (TorchScript and dynamo): no softmax and no S x S tensor left in the imported graph
# (before: S x (S + 1) logits, a max, a softmax and a slice a layer). The
# loss and every gradient (the sinks' included) equal transformers' within
# 1e-4 on 1 and 2 devices. The model is a tiny GptOssForCausalLM (a sliding
# and a full layer, grouped heads) from a config object. The ONNX model is
# the same GPT-OSS with each layer's MoE block swapped for a dense MLP, so
# that this test is about the attention alone (GPT-OSS's own; the MoE block
# through both exporters is torch2-gpt-oss-onnx.py's).

import contextlib
import io
import os
import sys
import warnings
from pathlib import Path

import numpy as np
import torch
import transformers as T

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import hf_models  # noqa: E402
import rp  # noqa: E402
import step0  # noqa: E402
import tiny_gpt  # noqa: E402
from rp import safetensors as rp_safetensors  # noqa: E402

out = Path(sys.argv[1])
S, M, VOCAB = 12, 4, hf_models.VOCAB
tokens, labels = tiny_gpt.batch(vocab=VOCAB, b=M, s=S)


class DenseMLP(torch.nn.Module):
    """In place of GPT-OSS's MoE block (its forward returns the router's
    scores second, which the decoder layer drops)."""

    def __init__(self, hidden, inner):
        super().__init__()
        self.up = torch.nn.Linear(hidden, inner)
        self.down = torch.nn.Linear(inner, hidden)

    def forward(self, x):
        return self.down(torch.nn.functional.silu(self.up(x))), None


def gpt_oss(dense):
    torch.manual_seed(0)
    lm = T.GptOssForCausalLM(T.GptOssConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        head_dim=8, num_local_experts=4, num_experts_per_tok=2,
        sliding_window=4, max_position_embeddings=64,
        experts_implementation="eager", attn_implementation="eager"))
    if dense:
        for layer in lm.model.layers:
            layer.mlp = DenseMLP(32, 48)
    lm.config.use_cache = False
    lm.eval()
    model = tiny_gpt.make_distinct(hf_models.LogitsOnly(lm))
    # Sinks far from 0, so that they weigh in every row.
    with torch.no_grad():
        for layer in lm.model.layers:
            layer.self_attn.sinks.normal_(0.0, 1.0)
    return model


kinds = sorted(str(layer.self_attn.sliding_window)
               for layer in gpt_oss(False).lm.model.layers)
# CHECK: layers: ['4', 'None']
print(f"layers: {kinds}")

for tag in ("trace", "torchscript", "dynamo"):
    model = gpt_oss(dense=tag != "trace")
    ref_loss, ref_grads = tiny_gpt.reference(model, tokens, labels)
    if tag == "trace":
        src = rp.trace(model, (tokens[:1],), out / "trace")
        mlir = src
    else:
        src = out / f"{tag}.onnx"
        if tag == "torchscript":
            step0.export_onnx(model, {"input_ids": tokens[:1]}, src)
        else:
            # (Its progress lines go to stdout.)
            with warnings.catch_warnings(), \
                    contextlib.redirect_stdout(io.StringIO()):
                warnings.simplefilter("ignore")
                torch.onnx.export(model, (tokens[:1],), str(src),
                                  input_names=["input_ids"],
                                  output_names=["logits"], opset_version=18,
                                  dynamo=True, optimize=False, verbose=False)
        mlir = out / f"{tag}.mlir"
        rp.run_tool("rp-import", [str(src), "-o", str(mlir)])
    text = Path(mlir).read_text()
    fused = [ln for ln in text.splitlines() if "rp.attention " in ln]
    square = sum(text.count(f"x{S}x{n}x") for n in (S, S + 1))
    print(f"{tag}: fused attentions {len(fused)} "
          f"({sum('sinks(' in ln for ln in fused)} with sinks, "
          f"{sum('window = 4' in ln for ln in fused)} with window = 4); "
          f"softmaxes {text.count('rp.softmax')}, S x S tensors {square}")
    for devices in (1, 2):
        plan = rp.compile(src, out / f"{tag}-{devices}.rpplan",
                          devices=devices, microbatches=M)
        grads_path = out / f"{tag}-{devices}.safetensors"
        loss = list(rp.train(plan, {"input_ids": tokens}, labels, steps=1,
                             sync=True, dump_grads=grads_path))[0]
        grads = rp_safetensors.read(grads_path)
        errs = {n: np.linalg.norm(grads[n] - g) / np.linalg.norm(g)
                for n, g in ref_grads.items() if n in grads}
        worst = max(errs, key=errs.get)
        sinks = [n for n in errs if n.endswith("sinks")]
        print(f"{tag}, {devices} device{'s' if devices > 1 else ''}: loss "
              f"within 1e-4: {abs(loss - ref_loss) <= 1e-4 * abs(ref_loss)}"
              f"; gradients {len(errs)} of {len(ref_grads)} ({len(sinks)} "
              f"sinks) within 1e-4: {all(e <= 1e-4 for e in errs.values())}"
              f" (loss {loss:.7f} vs {ref_loss:.7f}; worst {errs[worst]:.1e},"
              f" {worst})")

# CHECK: trace: fused attentions 2 (2 with sinks, 1 with window = 4); softmaxes 0, S x S tensors 0
# CHECK: trace, 1 device: loss within 1e-4: True; gradients 37 of 37 (2 sinks) within 1e-4: True
# CHECK: trace, 2 devices: loss within 1e-4: True; gradients 37 of 37 (2 sinks) within 1e-4: True
# CHECK: torchscript: fused attentions 2 (2 with sinks, 1 with window = 4); softmaxes 0, S x S tensors 0
# CHECK: torchscript, 1 device: loss within 1e-4: True; gradients 33 of 33 (2 sinks) within 1e-4: True
# CHECK: torchscript, 2 devices: loss within 1e-4: True; gradients 33 of 33 (2 sinks) within 1e-4: True
# CHECK: dynamo: fused attentions 2 (2 with sinks, 1 with window = 4); softmaxes 0, S x S tensors 0
# CHECK: dynamo, 1 device: loss within 1e-4: True; gradients 33 of 33 (2 sinks) within 1e-4: True
# CHECK: dynamo, 2 devices: loss within 1e-4: True; gradients 33 of 33 (2 sinks) within 1e-4: True
