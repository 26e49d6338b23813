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


sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import hf_models  # noqa: E402
import moe_check  # noqa: E402
import rp  # noqa: E402
import step0  # noqa: E402
import tiny_gpt  # noqa: E402
import tiny_mixtral  # noqa: E402

out = Path(sys.argv[1])
M = 4
VOCAB = hf_models.VOCAB
tokens, labels = tiny_gpt.batch(vocab=VOCAB, b=M, s=16)
inputs = {"input_ids": tokens}


for name, make in (("mixtral", tiny_mixtral.mixtral),
                   ("tie", lambda: tiny_mixtral.mixtral(True))):
    model = make()
    if name == "tie":
        ties = tiny_mixtral.boundary_ties(model, tokens)
        print(f"tie: tokens routed by a tie: {ties > 0}")
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
