# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %PYTHON %s %t | FileCheck %s

# Mixture-of-experts models through the ONNX path: transformers'
# MixtralForCausalLM (tiny config, 4 experts, top-2, distinct random
# weights) exported with the TorchScript exporter (opset 17), whose expert
# loop rp-import recognises into the rp.moe ops (lib/Import/ONNX/
# MoEBlocks.cpp, docs/moe.md). On one device with 4 microbatches the step-0
# loss and every parameter's gradient equal PyTorch autograd's within 1e-4;
# on 2 and 4 devices in sync mode the losses of 2 steps and the step-0
# gradients are bitwise those of one device. "tie" gives experts 1 and 2
# the same router row, so every token scores them equal: the loss and
# gradients match PyTorch only if rp breaks the tie as torch.topk does
# (the lower index first). (transformers 4.37's export, which bakes the
# example's token lists in and leaves out experts it did not reach, is
# refused when an expert is missing: Import/ONNX/error-moe-missing-expert.)

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


def mixtral(tie=False):
    torch.manual_seed(0)
    lm = T.MixtralForCausalLM(T.MixtralConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=64, num_local_experts=4,
        num_experts_per_tok=2))
    lm.config.use_cache = False
    lm.eval()
    model = tiny_gpt.make_distinct(hf_models.LogitsOnly(lm))
    if tie:
        with torch.no_grad():
            for layer in lm.model.layers:
                gate = layer.block_sparse_moe.gate.weight
                gate[2] = gate[1]
    return model


def boundary_ties(model):
    """Tokens whose top-2 holds exactly one of experts 1 and 2 while the
    two score bitwise equal: where the tie-break decides the routing."""
    count = []

    def hook(module, args, logits):
        p = torch.softmax(logits, -1)
        top = p.topk(2, -1).indices
        one = (top == 1).any(-1) ^ (top == 2).any(-1)
        count.append(int((one & (p[:, 1] == p[:, 2])).sum()))

    hooks = [layer.block_sparse_moe.gate.register_forward_hook(hook)
             for layer in model.lm.model.layers]
    with torch.no_grad():
        model(tokens)
    for h in hooks:
        h.remove()
    return sum(count)


for name, make in (("mixtral", mixtral), ("tie", lambda: mixtral(True))):
    model = make()
    if name == "tie":
        print(f"tie: tokens routed by a tie: {boundary_ties(model) > 0}")
    ref_loss, ref_grads = tiny_gpt.reference(model, tokens, labels)
    src = out / f"{name}.onnx"
    step0.export_onnx(model, {"input_ids": tokens[:1]}, src)
    mlir = out / f"{name}.mlir"
    rp.run_tool("rp-import", [str(src), "-o", str(mlir)])
    text = mlir.read_text()
    print(f"{name}: moe ops: {text.count('rp.moe.route ')} routes, "
          f"{text.count('rp.moe.grouped_matmul ')} grouped matmuls")
    moe_check.check(name, src, out, inputs, labels, M, ref_loss,
                    ref_grads)

# CHECK:      mixtral: moe ops: 2 routes, 6 grouped matmuls
# CHECK-NEXT: mixtral: loss within 1e-4: True
# CHECK-NEXT: mixtral: gradients 41 of 41 within 1e-4: True
# CHECK-NEXT: mixtral: 2 devices bitwise: True
# CHECK-NEXT: mixtral: 4 devices bitwise: True
# CHECK-NEXT: tie: tokens routed by a tie: True
# CHECK-NEXT: tie: moe ops: 2 routes, 6 grouped matmuls
# CHECK-NEXT: tie: loss within 1e-4: True
# CHECK-NEXT: tie: gradients 41 of 41 within 1e-4: True
# CHECK-NEXT: tie: 2 devices bitwise: True
# CHECK-NEXT: tie: 4 devices bitwise: True
