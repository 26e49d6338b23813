"""Translations for torch's dynamo ONNX exporter (``torch.onnx.export(...,
dynamo=True, custom_translation_table=...)``) of ops it has no ONNX
function for, in standard ONNX ops rp-import maps. rp.onnx_symbolics's
``dynamo_table()`` returns them; its module docstring says when each is
needed."""

from __future__ import annotations

# Giles (2010), "Approximating the erfinv function", single precision:
# w = -log((1 - x)(1 + x)); erfinv(x) ~ x p(w - 2.5) for w < 5, else
# x q(sqrt(w) - 3). Horner coefficients, highest degree first.
_ERFINV_SMALL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06,
                 -4.39150654e-06, 0.00021858087, -0.00125372503,
                 -0.00417768164, 0.246640727, 1.50140941)
_ERFINV_LARGE = (-0.000200214257, 0.000100950558, 0.00134934322,
                 -0.00367342844, 0.00573950773, -0.0076224613,
                 0.00943887047, 1.00167406, 2.83297682)
_TWO_OVER_SQRT_PI = 1.1283791670955126


def is_all_true(x):
    """aten._is_all_true: whether every element of a bool tensor is true
    (True for an empty one, as torch's): the minimum over all elements as
    int32 (ReduceMin of nothing is the type's largest value)."""
    from onnxscript import ir
    from onnxscript import opset18 as op
    lowest = op.ReduceMin(op.Cast(x, to=ir.DataType.INT32), keepdims=0)
    return op.Cast(lowest, to=ir.DataType.BOOL)


def erf_inv(x):
    """aten.erfinv / prims.erf_inv (torch.distributions.Normal's icdf:
    Gemma 3n's activation sparsity): Giles' approximation refined by two
    Newton steps on Erf, y -= (erf(y) - x) / (2/sqrt(pi) exp(-y^2)), which
    reach torch's value within one float32 ulp over (-1, 1); +-1 give
    +-inf and |x| > 1 NaN, as torch's."""
    from onnxscript import opset18 as op

    def const(v):
        return op.CastLike(v, x)

    def horner(t, coefficients):
        p = const(coefficients[0])
        for c in coefficients[1:]:
            p = op.Add(const(c), op.Mul(p, t))
        return p

    one = const(1.0)
    w = op.Neg(op.Log(op.Mul(op.Sub(one, x), op.Add(one, x))))
    small = horner(op.Sub(w, const(2.5)), _ERFINV_SMALL)
    large = horner(op.Sub(op.Sqrt(w), const(3.0)), _ERFINV_LARGE)
    y = op.Mul(op.Where(op.Less(w, const(5.0)), small, large), x)
    for _ in range(2):
        slope = op.Mul(const(_TWO_OVER_SQRT_PI), op.Exp(op.Neg(op.Mul(y, y))))
        y = op.Sub(y, op.Div(op.Sub(op.Erf(y), x), slope))
    # Newton's step is 0/0 at +-1 (erf(inf) = 1): +-inf there, as
    # constants (an infinity computed from x would give the backward
    # 0 * inf = NaN at every other element).
    inf = const(float("inf"))
    return op.Where(op.Equal(x, one), inf,
                    op.Where(op.Equal(x, op.Neg(one)), op.Neg(inf), y))


def unsqueeze_complex(self, dim: int):
    """aten.unsqueeze of a complex tensor (DeepSeek-V2's and Llama 4's
    rotary table, ``freqs_cis[:, None]`` after ``torch.polar``). torchlib
    writes a complex tensor as its view_as_real pairs (a trailing axis of
    2) and has polar, the complex product and view_as_real on that layout,
    not unsqueeze: a negative dim counts from before the pair axis."""
    from onnxscript import opset18 as op
    return op.Unsqueeze(self, [dim if dim >= 0 else dim - 1])


# Translations of ops on complex inputs, by torchlib name.
_COMPLEX = {"aten::unsqueeze": unsqueeze_complex}
_COMPLEX_DONE = []


def register_complex():
    """Adds _COMPLEX to onnxscript's torchlib registry, once: the dynamo
    exporter registers custom_translation_table's entries as real-valued
    only (is_complex=False; torch's own TODO) and dispatches an op on a
    complex input to complex-valued translations only, which it takes
    from that registry each export."""
    if _COMPLEX_DONE:
        return
    from onnxscript.function_libs.torch_lib.registration import torch_op
    for name, fn in _COMPLEX.items():
        torch_op(name, complex=True, trace_only=True)(fn)
    _COMPLEX_DONE.append(True)


def table():
    """{aten overload: translation} for custom_translation_table (and
    the complex-valued translations registered, register_complex)."""
    import torch

    from rp import _onnx_stop_gradient
    register_complex()
    return {
        _onnx_stop_gradient.define().default: _onnx_stop_gradient.translation,
        torch.ops.aten._is_all_true.default: is_all_true,
        torch.ops.aten.erfinv.default: erf_inv,
        torch.ops.prims.erf_inv.default: erf_inv,
    }
