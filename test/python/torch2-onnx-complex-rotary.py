# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: %TORCH2_PYTHON %s %t | FileCheck %s

# Complex rotary tables (DeepSeek-V2, Llama 4) through the TorchScript
# exporter after rp.onnx_symbolics.register(): torch.polar builds the table,
# scaled by a float64 0-d tensor, cast with .to(), unsqueezed and sliced;
# the queries and keys turn complex with view_as_complex, are multiplied by
# the table and turn real again with view_as_real. ONNX has no complex
# tensors: the symbolics write each complex value as its view_as_real pairs
# (python/rp/_onnx_complex.py). Checked: without register() the export
# stops at aten::polar; after it, the exported graph holds no complex type,
# and the LM trains on 1 and 2 devices with every gradient right (a
# conjugated table would turn the rotation backwards and the loss with it;
# a dim not moved past the pair would stop the export or change the
# shapes). Near misses, refused at export naming the op: a complex value
# read by an op the symbolics do not write on pairs (abs), and a complex
# tensor cast to a real type. The same model through the dynamo exporter
# with rp.onnx_symbolics.dynamo_table() (its complex unsqueeze), which
# stops at that unsqueeze without it.

import sys
import warnings
from pathlib import Path

import torch
import torch.nn as nn

sys.path.insert(0, str(Path(__file__).resolve().parent / "Inputs"))
import torch2_lm_check  # noqa: E402

import rp.onnx_symbolics  # noqa: E402


class Rotary(nn.Module):
    """Attention with DeepSeek-V2's complex rotary (4 heads of 4)."""

    def __init__(self, d=16):
        super().__init__()
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        inv = 1.0 / (100.0 ** (torch.arange(0, 4, 2).float() / 4))
        self.register_buffer("inv_freq", inv, persistent=False)

    def forward(self, x):
        b, s, d = x.shape
        freqs = torch.arange(s).float()[None, :, None] * self.inv_freq
        table = torch.polar(torch.ones_like(freqs), freqs)
        table = table * torch.tensor(0.9, dtype=torch.float64)
        table = table.to(x.device).unsqueeze(-3)[:, :, -s:]  # [1,1,s,2]

        def turn(t):
            t = t.reshape(b, s, 4, 4).transpose(1, 2)
            c = torch.view_as_complex(t.float().reshape(b, 4, s, 2, 2))
            return torch.view_as_real(c * table).flatten(3)

        q, k = turn(self.q(x)), turn(self.k(x))
        causal = torch.full((s, s), float("-inf")).triu(1)
        att = torch.softmax(q @ k.transpose(-1, -2) * 0.5 + causal, -1)
        v = self.v(x).reshape(b, s, 4, 4).transpose(1, 2)
        return x + (att @ v).transpose(1, 2).reshape(b, s, d)


class Abs(nn.Module):
    def forward(self, r, t):
        return torch.polar(r, t).abs()


class ToReal(nn.Module):
    def forward(self, q, t):
        c = torch.view_as_complex(q) * torch.polar(torch.ones_like(t), t)
        return c.to(torch.float32)


out = Path(sys.argv[1])


def export(module, args, name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, str(out / name), opset_version=17,
                          dynamo=False)


def attempt(name, module, args):
    try:
        export(module, args, name + ".onnx")
        print(f"{name}: exported")
    except Exception as e:  # the exporter's own error types
        print(f"{name}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")


x = torch.randn(1, 6, 16)
attempt("before register", Rotary(), (x,))
# CHECK: before register: UnsupportedOperatorError: Exporting the operator 'aten::polar' to ONNX opset version 17 is not supported

rp.onnx_symbolics.register()
export(Rotary(), (x,), "rotary.onnx")
import onnx  # noqa: E402

graph = onnx.shape_inference.infer_shapes(
    onnx.load(str(out / "rotary.onnx"))).graph
values = list(graph.value_info) + list(graph.output)
print("typed values:", len(values) > 40)
types = {v.type.tensor_type.elem_type for v in values}
print("complex types:", sorted(t for t in types if t in (
    onnx.TensorProto.COMPLEX64, onnx.TensorProto.COMPLEX128)))
# CHECK: typed values: True
# CHECK: complex types: []

torch2_lm_check.check_both_paths(Rotary, out, paths=("torchscript",))
# CHECK: torchscript: loss True, grads True (15 of 15 gradients by name within 0.0001 {{.*}}), bitwise True, None



def dynamo_attempt(table):
    """The dynamo export's first error line, or 'exported'."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(Rotary(), (x,), str(out / "dynamo.onnx"),
                              dynamo=True, optimize=False, opset_version=18,
                              custom_translation_table=table)
        return "exported"
    except Exception as e:  # torch.onnx's ConversionError
        from families_export import cause
        return str(cause(e)).splitlines()[0][:90]


# The dynamo exporter: torchlib writes complex values as pairs and has
# polar, the complex product and view_as_real, not unsqueeze; its
# custom_translation_table registers real-valued translations only, so
# dynamo_table() adds the complex unsqueeze to torchlib's registry.
print("dynamo before the table:", dynamo_attempt(None))
print("dynamo with the table:", dynamo_attempt(rp.onnx_symbolics
                                              .dynamo_table()))
torch2_lm_check.check_both_paths(Rotary, out, paths=("dynamo",))
# CHECK: dynamo before the table: No ONNX function found for <OpOverload(op='aten.unsqueeze', overload='default')>
# CHECK: dynamo with the table: exported
# CHECK: dynamo: loss True, grads True (15 of 15 gradients by name within 0.0001 {{.*}}), bitwise True, None

attempt("abs", Abs(), (torch.rand(4), torch.rand(4)))
attempt("to real", ToReal(), (torch.randn(3, 2), torch.randn(3)))
# CHECK: abs: SymbolicValueError: Unsupported: ONNX export of operator aten::polar, its complex value reaches aten::abs
# CHECK: to real: SymbolicValueError: Unsupported: ONNX export of operator aten::to, a complex tensor cast to Float
