# RUN: rm -rf %t && mkdir -p %t
# RUN: %PYTHON %s %t | FileCheck %s
# RUN: FileCheck %s --check-prefix=IR < %t/gpt/model.mlir
# RUN: rp-opt %t/gpt/model.mlir --rp-verify-graph -o /dev/null

# rp.trace -> rp.compile -> rp.train on one device for a GPT written with
# torch.nn modules (Inputs/tiny_gpt.py): the step-0 loss and every
# parameter's gradient equal PyTorch autograd's within 1e-4 (DESIGN.md:
# relative loss error; per tensor ||a - b|| / ||ref||), and the same model
# exported to ONNX (opset 17, do_constant_folding=False) trains to the same
# losses as the traced graph within 1e-5.

import os
from rp import safetensors as rp_safetensors
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import rp  # noqa: E402
import step0  # noqa: E402
import tiny_gpt  # noqa: E402

out = Path(sys.argv[1])
torch.manual_seed(0)
model = tiny_gpt.make_distinct(tiny_gpt.GPT())
tokens, labels = tiny_gpt.batch()
ref_loss, ref_grads = tiny_gpt.reference(model, tokens, labels)

src = rp.trace(model, (tokens,), out / "gpt")
# CHECK: traced model.mlir weights.safetensors
print("traced", src.name, *sorted(p.name for p in src.parent.iterdir()
                                  if p.name != "model.mlir"))

# The weights file is a safetensors file holding every parameter once (the
# tied lm_head.weight is wte.weight), by module path, with the module's
# values; the IR points into it.
stored = rp_safetensors.read(src.parent / "weights.safetensors")
params = dict(model.named_parameters())
same = sorted(stored) == sorted(params) and all(
    np.array_equal(stored[n], p.detach().numpy()) for n, p in params.items())
# CHECK-NEXT: weights: 28 tensors, equal to the module's: True
print(f"weights: {len(stored)} tensors, equal to the module's: {same}")

plan = rp.compile(src, out / "plans" / "gpt.rpplan")
# CHECK-NEXT: compiled gpt.rpplan: {{.*}}gpt.rpplan: training plan, 1 device, round-robin schedule, 1 microbatch per step; 4 layers
print("compiled", plan.name + ":", rp.driver.last_compile_summary.strip())

grads_path = out / "grads.safetensors"
losses = list(rp.train(plan, {"tokens": tokens}, labels, steps=1,
                       dump_grads=grads_path))
loss_err = abs(losses[0] - ref_loss) / abs(ref_loss)
got = rp_safetensors.read(grads_path)
errs = {n: np.linalg.norm(got[n] - g) / np.linalg.norm(g)
        for n, g in ref_grads.items() if n in got}
worst = max(errs, key=errs.get)
# CHECK-NEXT: loss rp {{[0-9.]+}} torch {{[0-9.]+}}: within 1e-4: True
print(f"loss rp {losses[0]:.6f} torch {ref_loss:.6f}: within 1e-4: {loss_err <= 1e-4}"
      f" (relative error {loss_err:.2e})")
# CHECK-NEXT: gradients: 28 of 28, within 1e-4: True
print(f"gradients: {len(errs)} of {len(ref_grads)}, within 1e-4: "
      f"{all(e <= 1e-4 for e in errs.values())} (worst {errs[worst]:.2e}, {worst})")

# Three synchronous steps through both paths.
traced = list(rp.train(plan, {"tokens": tokens}, labels, steps=3, sync=True))
onnx_path = out / "gpt.onnx"
step0.export_onnx(model, {"tokens": tokens}, onnx_path)
onnx_plan = rp.compile(onnx_path)
onnx = list(rp.train(onnx_plan, {"tokens": tokens.numpy()}, labels.numpy(),
                     steps=3, sync=True))
diff = max(abs(a - b) / abs(b) for a, b in zip(traced, onnx))
# CHECK-NEXT: traced vs onnx: 3 steps, within 1e-5: True
print(f"traced vs onnx: {len(onnx)} steps, within 1e-5: {diff <= 1e-5} "
      f"(max relative difference {diff:.2e}; losses {traced} / {onnx})")
# CHECK-NEXT: loss decreases: True
print("loss decreases:", traced[2] < traced[1] < traced[0])

# IR: func.func @main(%arg0: tensor<2x16xi64> {rp.name = "tokens"}) -> (tensor<2x16x64xf32> {rp.name = "output"})
# IR: rp.param "wte.weight" trainable at "weights.safetensors"[{{[0-9]+}}] : tensor<64x32xf32>
# IR-NOT: lm_head.weight
# IR: rp.layer "prefix"
# IR: rp.gather
# IR: rp.layer "h.0"
# IR: rp.layer_norm
# IR: rp.matmul {{.*}} transpose_b
# IR: rp.attention {{.*}} causal
# IR: rp.gelu
# IR: rp.layer "h.1"
# IR: rp.layer "suffix"
# IR: return
