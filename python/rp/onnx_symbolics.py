"""ONNX symbolics for torch's TorchScript exporter that it lacks or gets
wrong, written in standard ONNX ops rp-import maps.

Call ``register()`` once before ``torch.onnx.export(..., dynamo=False)``::

    import rp.onnx_symbolics
    rp.onnx_symbolics.register()
    torch.onnx.export(model, args, "model.onnx", opset_version=17,
                      dynamo=False, do_constant_folding=False)

It registers, through ``torch.onnx.register_custom_op_symbolic`` (the
exporter's documented hook; it affects every later TorchScript export in
the process, and none by the dynamo exporter):

- ``aten::expm1`` as ``Exp(x) - 1`` (xIELU activations: Apertus). The
  exporter has none ("Exporting the operator 'aten::expm1' to ONNX opset
  version 17 is not supported"). Below |x| ~ 1e-4 it loses expm1's
  relative precision (absolute error ~1e-8).
- ``aten::rms_norm`` as ``x / sqrt(mean(x^2) + eps) * weight`` over the
  normalized dimensions, in the input's type, eps defaulting to the
  type's machine epsilon as torch's does (``nn.RMSNorm``: DiffLlama).
- ``aten::linalg_solve_triangular`` for ``left=True`` (the gated delta
  rule's UT transform: Qwen3-Next, Qwen3.5, OLMo-Hybrid, ...): the
  triangle is made unit by dividing its rows by the diagonal (or the
  diagonal is taken as ones with ``unitriangular=True``), leaving
  ``(I + N) X = B`` with N strictly triangular, so nilpotent; then
  ``X = (I - N)(I + N^2)(I + N^4)... B`` with ceil(log2 n) factors (exact
  in exact arithmetic: N^n = 0) as Trilu, MatMul and Add. ``left=False``
  and a matrix size unknown at export are refused by the exporter with
  this module's reason.
- ``aten::repeat_interleave`` given a copy of its ``dim``: the
  exporter's own symbolic (opset 13) normalizes a negative ``dim`` with
  ``dim += rank`` on the tensor held by the graph's Constant node, which
  the exporter shares between every use of the same value, so after
  ``x.repeat_interleave(2, dim=-1)`` every other -1 of the model reads
  the rank of x minus 1: Cohere's ``view(..., -1, head_dim)`` after its
  rank-3 rotary table reshapes to 2 heads ("cannot reshape ... (512
  elements) to 256 elements"; onnxruntime refuses the same graph: also
  Cohere2, Helium, and ERNIE 4.5's "Expand input shape constraint") and
  GLM's ``flatten(-2)`` after a rank-4 one flattens nothing ("All tensors
  must have the same rank" at a later ``torch.cat``: also GLM-4 and
  DeepSeek-V4). The graph it writes is the exporter's own.
- ``aten::diff`` (BLT's patch boundaries): the exporter has none
  ("Exporting the operator 'aten::diff' to ONNX opset version 17 is not
  supported"). ``prepend`` and ``append`` concatenated, then ``n`` times
  the Slice from 1 minus the Slice to -1 along ``dim`` (Xor for bools, as
  torch).
- ``aten::unfold`` (Inkling2's short convolution,
  ``context.unfold(-1, k, 1)`` of a slice whose end the tracer records
  from the sequence length): the exporter's symbolic reads the unfolded
  dimension's size and stops where the trace left it unknown ("ONNX
  export of operator Unfold, input size not accessible"). With a constant
  window and step, the window's j-th elements are one Slice each,
  ``x[j : L - (k-1-j) : step]`` with the end counted from the back (L is
  never read), unsqueezed and concatenated along a new last axis.

It also mends one bug of torch's tracer, which runs before any symbolic:

- ``Tensor.scatter(dim, index, value)`` with a Python bool ``value``
  (DeepSeek-V3.2's sparse-attention indexer, ``mask.scatter(-1, topk,
  False)``: DeepSeek-V3.2, GLM-MoE-DSA, HY-V4, dots3, AXK2): the tracer
  records the bool as a ``bool`` constant where ``aten::scatter.value``
  takes a ``Scalar``, and the trace stops at "INTERNAL ASSERT FAILED at
  alias_analysis.cpp ... We don't have an op for aten::scatter". A kernel
  registered for the tracer's dispatch key (it runs only while a trace
  records) writes ``scatter(dim, index, full_like(index, int(value),
  dtype=self.dtype))`` instead: the same tensor, recorded with an int
  constant the exporter's own ScatterElements symbolic reads.

- Complex rotary tables (DeepSeek-V2, Llama 4: ``torch.polar``,
  ``view_as_complex``, a complex product, ``view_as_real``): ONNX has no
  complex arithmetic, so each complex value is written as its
  ``view_as_real`` pairs and ``polar``, ``view_as_complex``,
  ``view_as_real``, and ``mul``/``unsqueeze``/``slice``/``to`` of complex
  values are written on them (python/rp/_onnx_complex.py; real inputs of
  those four keep the exporter's own symbolics). A complex value reaching
  any other op is refused at export, naming it.
- ``|`` and ``&`` of an integer tensor with a bool one (CPM-Ant's
  attention mask): the exporter writes them for bools only and ONNX's
  bitwise ops start at opset 18; with one side 0 or 1 they are
  ``a + b (1 - a mod 2)`` and ``b (a mod 2)``, exact for every integer
  (python/rp/_onnx_bitwise.py). Two integer tensors are BitwiseOr/And at
  opset 18 and up and refused below it.

For torch's dynamo exporter, ``dynamo_table()`` returns translations to
pass as its documented ``custom_translation_table``::

    torch.onnx.export(model, args, "model.onnx", opset_version=18,
                      dynamo=True, optimize=False,
                      custom_translation_table=rp.onnx_symbolics
                      .dynamo_table())

for the ops it has no ONNX function for ("No ONNX function found for
<OpOverload(op='aten._is_all_true' ...)>"), written in rp/_onnx_dynamo.py:

- ``aten._is_all_true`` (what ``torch._check_tensor_all`` and a
  ``torch.distributions`` argument check record): ReduceMin of the mask
  as int32, as bool (an empty mask is all true, as torch's).
- ``aten.erfinv`` and ``prims.erf_inv`` (``Normal(0, 1).icdf``: Gemma
  3n's activation sparsity): Giles' approximation and two Newton steps on
  Erf, within one float32 ulp of torch's over (-1, 1).
- ``rp.stop_gradient`` (the marker rp.onnx_forms.exportable puts after
  a no-grad region's module call): one node ``StopGradient`` of the
  domain ``rp``, which rp-import maps to rp.stop_gradient.

The exporter registers that table's translations as real-valued only and
dispatches an op on a complex input to complex-valued ones only ("No
decompositions registered for the complex-valued input"), so
``dynamo_table()`` also adds its complex-valued translations to
onnxscript's torchlib registry (every later dynamo export in the process
reads them), on torchlib's layout of a complex tensor (its
``view_as_real`` pairs, where torchlib has ``polar``, the complex product
and ``view_as_real``):

- ``aten.unsqueeze`` of a complex tensor (DeepSeek-V2's and Llama 4's
  rotary table, ``freqs_cis[:, None]``): a negative dim counted from
  before the pair axis.
"""

from __future__ import annotations

import math

# The opsets registered (13 to 20): the exporter dispatches an op to its
# symbolic of the highest opset at or below the export's, its own and
# registered ones alike, so each is registered at every opset rp-import
# reads. rp._onnx_stop_gradient's marker is registered at the same ones.
from rp._onnx_stop_gradient import OPSETS

_EPS = {"Float": 1.1920928955078125e-07, "Double": 2.220446049250313e-16,
        "Half": 0.0009765625, "BFloat16": 0.0078125}


def _sh():
    from torch.onnx import symbolic_helper
    return symbolic_helper


def _const(g, values, dtype=None):
    import torch
    return g.op("Constant", value_t=torch.tensor(values, dtype=dtype))


def _expm1(g, x):
    one = g.op("CastLike", _const(g, 1.0), x)
    return g.op("Sub", g.op("Exp", x), one)


def _reduce_mean(g, x, axes):
    if g.opset >= 18:
        import torch
        return g.op("ReduceMean", x, _const(g, axes, torch.int64),
                    keepdims_i=1)
    return g.op("ReduceMean", x, axes_i=axes, keepdims_i=1)


def _rms_norm(g, x, normalized_shape, weight, eps):
    sh = _sh()
    shape = sh._maybe_get_const(normalized_shape, "is")
    if not isinstance(shape, (list, tuple)) and \
            sh._is_packed_list(normalized_shape):
        shape = sh._unpack_list(normalized_shape)  # sizes read at run time
    rank = sh._get_tensor_rank(x)
    if rank is None or not isinstance(shape, (list, tuple)):
        return sh._unimplemented(
            "aten::rms_norm", "the input's rank and normalized_shape must "
            "be known at export (rp.onnx_symbolics)", x)
    axes = list(range(rank - len(shape), rank))
    if sh._is_none(eps):
        # torch.finfo(x.dtype).eps, as aten::rms_norm takes it.
        eps_value = _EPS.get(x.type().scalarType(), _EPS["Float"])
    else:
        eps_value = sh._maybe_get_const(eps, "f")
    mean = _reduce_mean(g, g.op("Mul", x, x), axes)
    eps_t = g.op("CastLike", _const(g, float(eps_value)), x)
    y = g.op("Div", x, g.op("Sqrt", g.op("Add", mean, eps_t)))
    if not sh._is_none(weight):
        y = g.op("Mul", y, weight)
    return y


def _solve_triangular(g, a, b, upper, left, unitriangular):
    import torch
    sh = _sh()
    upper = sh._maybe_get_const(upper, "b")
    left = sh._maybe_get_const(left, "b")
    unit = sh._maybe_get_const(unitriangular, "b")
    sizes = sh._get_tensor_sizes(a)
    if not sizes or not isinstance(sizes[-1], int):
        # The exporter's shape inference can lose the sizes the trace saw
        # (Qwen3-Next's system: Float(*, *, *, *, *)); the traced node's
        # input keeps them.
        try:
            sizes = g.original_node.inputsAt(0).type().sizes()
        except (AttributeError, RuntimeError):  # not a complete tensor type
            sizes = None
    if not isinstance(left, bool) or not left:
        return sh._unimplemented(
            "aten::linalg_solve_triangular",
            "rp.onnx_symbolics writes left=True only (A X = B); solve the "
            "transposed system for X A = B", a)
    n = sizes[-1] if sizes else None
    if not isinstance(n, int) or not isinstance(upper, bool) \
            or not isinstance(unit, bool):
        return sh._unimplemented(
            "aten::linalg_solve_triangular",
            "the matrix size and the upper/unitriangular flags must be "
            "known at export (rp.onnx_symbolics)", a)
    up = 1 if upper else 0
    strict = g.op("Trilu", a, _const(g, 1 if upper else -1, torch.int64),
                  upper_i=up)
    if not unit:
        # A = D (I + D^-1 N): divide the rows of N and of B by the diagonal.
        eye = g.op("CastLike", _const(g, torch.eye(n).tolist()), a)
        diag = g.op("ReduceSum", g.op("Mul", a, eye),
                    _const(g, [-1], torch.int64), keepdims_i=1)
        strict = g.op("Div", strict, diag)
        b = g.op("Div", b, diag)
    # (I + N)^-1 = (I - N)(I + N^2)(I + N^4)...: N^n = 0.
    power = g.op("Neg", strict)
    x = b
    for step in range(max(1, math.ceil(math.log2(max(n, 2))))):
        x = g.op("Add", x, g.op("MatMul", power, x))
        if 2 ** (step + 1) < n:
            power = g.op("MatMul", power, power)
    return x


def _repeat_interleave(g, x, repeats, dim=None, output_size=None):
    import torch
    from torch.onnx import symbolic_opset13
    sh = _sh()
    d = sh._maybe_get_const(dim, "i")
    if isinstance(d, int):
        # The exporter's symbolic adds the rank to a negative dim in place
        # (`dim += len(sizes)` on the tensor of the Constant node), so it
        # gets a copy of its own, read by nothing else.
        dim = g.op("Constant", value_t=torch.tensor(d))
    return symbolic_opset13.repeat_interleave(g, x, repeats, dim, output_size)


def _unfold(g, x, dimension, size, step):
    import torch
    from torch.onnx import symbolic_opset12
    sh = _sh()
    dim = sh._maybe_get_const(dimension, "i")
    k = sh._maybe_get_const(size, "i")
    st = sh._maybe_get_const(step, "i")
    if not all(isinstance(v, int) for v in (dim, k, st)):
        return symbolic_opset12.unfold(g, x, dimension, size, step)
    # The window's j-th element of every window: x[j : L - (k-1-j) : step]
    # along dim, an end counted from the back, so the length L is never
    # read; stacked along a new last axis.
    cols = []
    for j in range(k):
        end = j - k + 1 if j < k - 1 else torch.iinfo(torch.int64).max
        s = g.op("Slice", x, _const(g, [j]), _const(g, [end]),
                 _const(g, [dim]), _const(g, [st]))
        cols.append(g.op("Unsqueeze", s, _const(g, [-1])))
    return cols[0] if k == 1 else g.op("Concat", *cols, axis_i=-1)


def _diff(g, x, n, dim, prepend=None, append=None):
    import torch
    sh = _sh()
    times = sh._maybe_get_const(n, "i")
    axis = sh._maybe_get_const(dim, "i")
    if not isinstance(times, int) or not isinstance(axis, int):
        return sh._unimplemented("aten::diff", "n and dim must be constants")
    parts = [v for v in (prepend, x, append)
             if v is not None and not sh._is_none(v)]
    if len(parts) > 1:
        x = g.op("Concat", *parts, axis_i=axis)
    # torch.diff of bools is their xor, of numbers the difference.
    is_bool = sh._is_bool(x)
    big = torch.iinfo(torch.int64).max
    for _ in range(times):
        hi = g.op("Slice", x, _const(g, [1]), _const(g, [big]),
                  _const(g, [axis]))
        lo = g.op("Slice", x, _const(g, [0]), _const(g, [-1]),
                  _const(g, [axis]))
        x = g.op("Xor" if is_bool else "Sub", hi, lo)
    return x


def _scatter_value_traced(keyset, x, dim, index, value):
    """aten::scatter.value at the tracer's dispatch key: while a trace
    records, as scatter.src of a tensor filled with ``value`` (a bool as
    an int: the tracer records a Python bool as a bool constant, which no
    aten::scatter overload takes)."""
    import torch
    if torch._C._get_tracing_state() is None:
        # Not recording: on to the keys below the tracer's (autograd, the
        # backend) as the tracer's own kernel goes.
        return torch.ops.aten.scatter.value.redispatch(
            keyset.remove(keyset.highestPriorityTypeId()), x, dim, index,
            value)
    fill = int(value) if isinstance(value, bool) else value
    src = torch.full_like(index, fill, dtype=x.dtype)
    return torch.ops.aten.scatter.src(x, dim, index, src)


_TRACER_LIB = []  # the torch.library registration, kept alive


def _register_tracer_fixes():
    import torch
    if _TRACER_LIB:
        return
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("scatter.value", _scatter_value_traced, "Tracer",
             with_keyset=True)
    _TRACER_LIB.append(lib)


def register():
    """Registers the symbolics above with the TorchScript exporter (opsets
    13 to 20) and the tracer's scatter kernel; calling it again is
    harmless."""
    import torch

    from rp import _onnx_bitwise, _onnx_complex
    _register_tracer_fixes()
    for name, fn in (
            ("aten::expm1", _expm1),
            ("aten::rms_norm", _rms_norm),
            ("aten::linalg_solve_triangular", _solve_triangular),
            ("aten::repeat_interleave", _repeat_interleave),
            ("aten::unfold", _unfold),
            ("aten::diff", _diff),
            *_onnx_complex.SYMBOLICS, *_onnx_bitwise.SYMBOLICS):
        for opset in OPSETS:
            torch.onnx.register_custom_op_symbolic(name, fn, opset)


def dynamo_table():
    """The translations for ``torch.onnx.export(..., dynamo=True,
    custom_translation_table=...)`` (module docstring)."""
    from rp import _onnx_dynamo
    return _onnx_dynamo.table()
