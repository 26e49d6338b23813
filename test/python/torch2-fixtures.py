# RUN: rm -rf %t && mkdir -p %t
# RUN: %PYTHON %s %S/Inputs/torch2 %t | FileCheck %s

# Exports that need torch 2, checked in CI's torch 1.13 venv from committed
# fixtures (Inputs/torch2, written by Inputs/make_torch2_fixtures.py with
# transformers 5): Llama (GQA, RoPE), Qwen2, Qwen3 (q/k norm), Mistral
# (sliding window) and GPT-2 (tied embeddings), each from the TorchScript
# exporter (opset 17) and the dynamo exporter (opset 18). Each imports, and
# trains with 4 microbatches of one sequence: on one device the step-0 loss
# and every gradient equal PyTorch's (saved beside the fixtures) within
# 1e-4; on 2 and 4 devices in sync mode the losses of 2 steps and the
# step-0 gradients are bitwise those of one device.

import sys
import time
from pathlib import Path

import numpy as np

import rp
from rp import safetensors as rp_safetensors

fixtures, out = Path(sys.argv[1]), Path(sys.argv[2])
M = 4

for name in ("llama", "qwen2", "qwen3", "mistral", "gpt2"):
    ref = np.load(fixtures / f"{name}.npz")
    inputs = {"input_ids": ref["tokens"]}
    for kind in ("torchscript", "dynamo"):
        tag = f"{name}/{kind}"
        src = fixtures / f"{name}-{kind}.onnx"
        start = time.perf_counter()
        try:
            rp.run_tool("rp-import", [str(src), "-o", str(out / f"{name}-{kind}.mlir")])
        except rp.ToolError as err:
            print(f"{tag}: import failed: {err.stderr.strip().splitlines()[0]}")
            continue
        seconds = time.perf_counter() - start
        runs = {}
        for devices in (1, 2, 4):
            grads = out / f"{name}-{kind}-{devices}.safetensors"
            try:
                plan = rp.compile(src, out / f"{name}-{kind}-{devices}.rpplan",
                                  devices=devices, microbatches=M)
                losses = [f"{v:.9g}" for v in rp.train(
                    plan, inputs, ref["labels"], steps=2, sync=True,
                    dump_grads=grads)]
            except rp.ToolError as err:
                print(f"{tag}: {devices} devices failed: "
                      f"{err.stderr.strip().splitlines()[0]}")
                break
            runs[devices] = (losses, rp_safetensors.read(grads))
        if 1 not in runs:
            continue
        one, got = runs[1]
        loss_err = abs(float(one[0]) - float(ref["loss"])) / abs(float(ref["loss"]))
        want = {k.split("/", 2)[2]: ref[k] for k in ref.files
                if k.startswith(f"grad/{kind}/")}
        errs = {n: np.linalg.norm(got[n] - g) / np.linalg.norm(g)
                for n, g in want.items() if n in got}
        worst = max(errs, key=errs.get)
        print(f"{tag}: loss within 1e-4: {loss_err <= 1e-4} "
              f"(rp {one[0]}, torch {float(ref['loss']):.9g})")
        print(f"{tag}: gradients {len(errs)} of {len(want)} within 1e-4: "
              f"{all(e <= 1e-4 for e in errs.values())} "
              f"(worst {errs[worst]:.2e}, {worst})")
        for devices in (2, 4):
            if devices not in runs:
                continue
            losses, g = runs[devices]
            same = losses == one and sorted(g) == sorted(got) and all(
                np.array_equal(g[n], got[n]) for n in got)
            print(f"{tag}: {devices} devices bitwise: {same}"
                  + ("" if same else f" (losses {losses} vs {one})"))
        print(f"{tag}: imported in {seconds:.2f} s", file=sys.stderr)

# CHECK:      llama/torchscript: loss within 1e-4: True
# CHECK-NEXT: llama/torchscript: gradients 21 of 21 within 1e-4: True
# CHECK-NEXT: llama/torchscript: 2 devices bitwise: True
# CHECK-NEXT: llama/torchscript: 4 devices bitwise: True
# CHECK-NEXT: llama/dynamo: loss within 1e-4: True
# CHECK-NEXT: llama/dynamo: gradients 21 of 21 within 1e-4: True
# CHECK-NEXT: llama/dynamo: 2 devices bitwise: True
# CHECK-NEXT: llama/dynamo: 4 devices bitwise: True
# CHECK-NEXT: qwen2/torchscript: loss within 1e-4: True
# CHECK-NEXT: qwen2/torchscript: gradients 27 of 27 within 1e-4: True
# CHECK-NEXT: qwen2/torchscript: 2 devices bitwise: True
# CHECK-NEXT: qwen2/torchscript: 4 devices bitwise: True
# CHECK-NEXT: qwen2/dynamo: loss within 1e-4: True
# CHECK-NEXT: qwen2/dynamo: gradients 27 of 27 within 1e-4: True
# CHECK-NEXT: qwen2/dynamo: 2 devices bitwise: True
# CHECK-NEXT: qwen2/dynamo: 4 devices bitwise: True
# CHECK-NEXT: qwen3/torchscript: loss within 1e-4: True
# CHECK-NEXT: qwen3/torchscript: gradients 25 of 25 within 1e-4: True
# CHECK-NEXT: qwen3/torchscript: 2 devices bitwise: True
# CHECK-NEXT: qwen3/torchscript: 4 devices bitwise: True
# CHECK-NEXT: qwen3/dynamo: loss within 1e-4: True
# CHECK-NEXT: qwen3/dynamo: gradients 25 of 25 within 1e-4: True
# CHECK-NEXT: qwen3/dynamo: 2 devices bitwise: True
# CHECK-NEXT: qwen3/dynamo: 4 devices bitwise: True
# CHECK-NEXT: mistral/torchscript: loss within 1e-4: True
# CHECK-NEXT: mistral/torchscript: gradients 21 of 21 within 1e-4: True
# CHECK-NEXT: mistral/torchscript: 2 devices bitwise: True
# CHECK-NEXT: mistral/torchscript: 4 devices bitwise: True
# CHECK-NEXT: mistral/dynamo: loss within 1e-4: True
# CHECK-NEXT: mistral/dynamo: gradients 21 of 21 within 1e-4: True
# CHECK-NEXT: mistral/dynamo: 2 devices bitwise: True
# CHECK-NEXT: mistral/dynamo: 4 devices bitwise: True
# CHECK-NEXT: gpt2/torchscript: loss within 1e-4: True
# CHECK-NEXT: gpt2/torchscript: gradients 28 of 28 within 1e-4: True
# CHECK-NEXT: gpt2/torchscript: 2 devices bitwise: True
# CHECK-NEXT: gpt2/torchscript: 4 devices bitwise: True
# CHECK-NEXT: gpt2/dynamo: loss within 1e-4: True
# CHECK-NEXT: gpt2/dynamo: gradients 28 of 28 within 1e-4: True
# CHECK-NEXT: gpt2/dynamo: 2 devices bitwise: True
# CHECK-NEXT: gpt2/dynamo: 4 devices bitwise: True
