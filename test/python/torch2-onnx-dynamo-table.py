# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: %TORCH2_PYTHON %s %t | FileCheck %s

# rp.onnx_symbolics.dynamo_table(): translations for torch's dynamo
# exporter (its documented custom_translation_table) of ops it has no ONNX
# function for: aten._is_all_true (torch.distributions' argument check)
# and erfinv (Normal(0, 1).icdf, as Gemma 3n's activation sparsity scales
# its gate; "No ONNX function found for <OpOverload(op='aten._is_all_true'
# ...)>" before). A small LM that reads both, on the gradient's path
# (erfinv of run-time values, the icdf of a constant), checked on the
# dynamo path as bench/families.py checks a family (it passes the table as
# a user would), 1 and 2 devices. Then the translations' values against
# torch's on the ONNX reference evaluator (erfinv's ends +-1 give +-inf;
# an empty mask is all true), and the near miss: without the table the
# export stops at _is_all_true.

import sys
import warnings
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, str(Path(__file__).resolve().parent / "Inputs"))
import torch2_lm_check  # noqa: E402

import rp.onnx_symbolics  # noqa: E402


class Layer(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.a = nn.Linear(d, d)

    def forward(self, x):
        h = self.a(x)
        # Gemma 3n's _gaussian_topk: a constant std multiplier from the
        # normal's inverse cdf (validate_args records _is_all_true).
        normal = torch.distributions.normal.Normal(0, 1)
        k = normal.icdf(torch.tensor(0.95, dtype=torch.float32))
        y = torch.special.erfinv(torch.tanh(h) * 0.9) * 0.5
        return x + y + torch.relu(h - k * h.std(dim=-1, keepdim=True))


torch2_lm_check.check_both_paths(Layer, sys.argv[1], paths=("dynamo",))

# CHECK: dynamo: loss True, grads True (7 of 7 gradients by name within 0.0001 {{.*}}), bitwise True, None


class Values(nn.Module):
    def forward(self, x, mask, empty):
        return (torch.special.erfinv(x), torch.ops.aten._is_all_true(mask),
                torch.ops.aten._is_all_true(empty))


x = torch.tensor([-1.0, -0.999, -0.5, -1e-4, 0.0, 0.3, 0.9, 0.9999, 1.0])
for name, mask in (("all true", torch.ones(2, 3, dtype=torch.bool)),
                   ("one false", torch.tensor([[True, False, True]]))):
    path = Path(sys.argv[1]) / "values.onnx"
    args = (x, mask, torch.zeros(0, dtype=torch.bool))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Values(), args, str(path), dynamo=True,
                          optimize=False, opset_version=18,
                          custom_translation_table=rp.onnx_symbolics
                          .dynamo_table())
    import onnx
    from onnx.reference import ReferenceEvaluator
    session = ReferenceEvaluator(onnx.load(str(path)))
    feeds = {i.name: a.numpy() for i, a in
             zip(onnx.load(str(path)).graph.input, args)}
    inv, all_mask, all_empty = session.run(None, feeds)
    want = torch.special.erfinv(x).numpy()
    ulps = np.abs(inv - want) / np.spacing(np.abs(want).astype(np.float32))
    print(f"{name}: erfinv ends {inv[0]} {inv[-1]}, worst "
          f"{float(np.max(ulps[1:-1])):.0f} ulp; all {bool(all_mask)}, "
          f"empty {bool(all_empty)}")

# CHECK: all true: erfinv ends -inf inf, worst {{[01]}} ulp; all True, empty True
# CHECK: one false: erfinv ends -inf inf, worst {{[01]}} ulp; all False, empty True

torch.manual_seed(0)
model = torch2_lm_check.LM(Layer)
try:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.randint(0, 64, (1, 16)),),
                          str(Path(sys.argv[1]) / "plain.onnx"), dynamo=True,
                          optimize=False, opset_version=18)
    print("without the table: exported")
except Exception as e:  # torch.onnx's ConversionError
    from families_export import cause
    print("without the table:", str(cause(e)).splitlines()[0][:90])

# CHECK: without the table: No ONNX function found for <OpOverload(op='aten._is_all_true', overload='default')>
