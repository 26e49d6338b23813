# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %PYTHON %s %t | FileCheck %s

# Hugging Face transformers' causal LMs (Inputs/hf_models.py: tiny configs,
# distinct random weights) through both of rp's front ends: the TorchScript
# ONNX export (opset 17, do_constant_folding=False: the causal masks and
# rotary tables are input-independent subgraphs that rp-import folds) and
# rp.trace. For each, on one device with 4 microbatches: the step-0 loss and
# every parameter's gradient equal PyTorch autograd's within 1e-4; on 2 and
# 4 devices in sync mode: the losses of 2 steps and the step-0 gradients
# are bitwise those of one device. The model is exported and traced once
# and compiled for each device count.

import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import hf_models  # noqa: E402
import rp  # noqa: E402
import step0  # noqa: E402
import tiny_gpt  # noqa: E402
from rp import safetensors as rp_safetensors  # noqa: E402

out = Path(sys.argv[1])
M = 4  # microbatches of one sequence each; the global batch is 4 x 16
tokens, labels = tiny_gpt.batch(vocab=hf_models.VOCAB, b=M, s=16)
inputs = {"input_ids": tokens}


def run(src, name, devices, steps, grads):
    plan = rp.compile(src, out / "plans" / f"{name}-{devices}.rpplan",
                      devices=devices, microbatches=M)
    losses = [f"{v:.9g}" for v in rp.train(plan, inputs, labels, steps=steps,
                                           sync=True, dump_grads=grads)]
    return losses, rp_safetensors.read(grads)


for name in hf_models.builders():
    model = hf_models.make(name)
    ref_loss, ref_grads = tiny_gpt.reference(model, tokens, labels)
    for front in ("onnx", "trace"):
        tag = f"{name}/{front}"
        start = time.perf_counter()
        if front == "onnx":
            src = out / f"{name}.onnx"
            step0.export_onnx(model, {"input_ids": tokens[:1]}, src)
            start = time.perf_counter()
            rp.run_tool("rp-import", [str(src), "-o",
                                      str(out / f"{name}.mlir")])
        else:
            src = rp.trace(model, (tokens[:1],), out / name)
        seconds = time.perf_counter() - start
        one, grads = run(src, tag.replace("/", "-"), 1, 2,
                         out / f"{name}-{front}-1.safetensors")
        loss_err = abs(float(one[0]) - ref_loss) / abs(ref_loss)
        errs = {n: np.linalg.norm(grads[n] - g) / np.linalg.norm(g)
                for n, g in ref_grads.items() if n in grads}
        worst = max(errs, key=errs.get)
        print(f"{tag}: loss within 1e-4: {loss_err <= 1e-4} "
              f"(rp {one[0]}, torch {ref_loss:.9g})")
        print(f"{tag}: gradients {len(errs)} of {len(ref_grads)} within "
              f"1e-4: {all(e <= 1e-4 for e in errs.values())} "
              f"(worst {errs[worst]:.2e}, {worst})")
        for devices in (2, 4):
            losses, g = run(src, tag.replace("/", "-"), devices, 2,
                            out / f"{name}-{front}-{devices}.safetensors")
            same = losses == one and sorted(g) == sorted(grads) and all(
                np.array_equal(g[n], grads[n]) for n in grads)
            print(f"{tag}: {devices} devices bitwise: {same}"
                  + ("" if same else f" (losses {losses} vs {one})"))
        print(f"{tag}: imported in {seconds:.2f} s", file=sys.stderr)

# CHECK:      llama/onnx: loss within 1e-4: True
# CHECK-NEXT: llama/onnx: gradients 21 of 21 within 1e-4: True
# CHECK-NEXT: llama/onnx: 2 devices bitwise: True
# CHECK-NEXT: llama/onnx: 4 devices bitwise: True
# CHECK-NEXT: llama/trace: loss within 1e-4: True
# CHECK-NEXT: llama/trace: gradients 21 of 21 within 1e-4: True
# CHECK-NEXT: llama/trace: 2 devices bitwise: True
# CHECK-NEXT: llama/trace: 4 devices bitwise: True
# CHECK-NEXT: qwen2/onnx: loss within 1e-4: True
# CHECK-NEXT: qwen2/onnx: gradients 27 of 27 within 1e-4: True
# CHECK-NEXT: qwen2/onnx: 2 devices bitwise: True
# CHECK-NEXT: qwen2/onnx: 4 devices bitwise: True
# CHECK-NEXT: qwen2/trace: loss within 1e-4: True
# CHECK-NEXT: qwen2/trace: gradients 27 of 27 within 1e-4: True
# CHECK-NEXT: qwen2/trace: 2 devices bitwise: True
# CHECK-NEXT: qwen2/trace: 4 devices bitwise: True
# CHECK-NEXT: mistral/onnx: loss within 1e-4: True
# CHECK-NEXT: mistral/onnx: gradients 21 of 21 within 1e-4: True
# CHECK-NEXT: mistral/onnx: 2 devices bitwise: True
# CHECK-NEXT: mistral/onnx: 4 devices bitwise: True
# CHECK-NEXT: mistral/trace: loss within 1e-4: True
# CHECK-NEXT: mistral/trace: gradients 21 of 21 within 1e-4: True
# CHECK-NEXT: mistral/trace: 2 devices bitwise: True
# CHECK-NEXT: mistral/trace: 4 devices bitwise: True
# CHECK-NEXT: gpt2/onnx: loss within 1e-4: True
# CHECK-NEXT: gpt2/onnx: gradients 28 of 28 within 1e-4: True
# CHECK-NEXT: gpt2/onnx: 2 devices bitwise: True
# CHECK-NEXT: gpt2/onnx: 4 devices bitwise: True
# CHECK-NEXT: gpt2/trace: loss within 1e-4: True
# CHECK-NEXT: gpt2/trace: gradients 28 of 28 within 1e-4: True
# CHECK-NEXT: gpt2/trace: 2 devices bitwise: True
# CHECK-NEXT: gpt2/trace: 4 devices bitwise: True
