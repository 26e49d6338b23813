"""Complex rotary tables through the TorchScript exporter, in real ONNX.

DeepSeek-V2 and Llama 4 build their rotary table as ``torch.polar(ones,
freqs)`` and rotate queries and keys as ``view_as_real(view_as_complex(q)
* table)``: complex values live only between ``polar``/``view_as_complex``
and ``view_as_real``. ONNX has no complex arithmetic, so each complex value
is written as the real tensor ``view_as_real`` would give (a trailing axis
of 2: real, imaginary), and the few ops the rotary applies to it are
written on that layout: ``polar`` as ``stack(r cos t, r sin t, -1)``,
``view_as_complex``/``view_as_real`` as the tensor itself, a complex
product as ``(ar br - ai bi, ar bi + ai br)``, a real factor broadcast over
the pair, ``unsqueeze``/``slice`` with a negative dim moved past the pair,
and ``to`` between complex types. Any other op reading a complex value
would read the pair axis as data, so ``polar`` and ``view_as_complex``
refuse at export, naming that op, unless every op their values reach (up
to ``view_as_real``) is one of these.

``mul``, ``unsqueeze``, ``slice`` and ``to`` are the exporter's own
symbolics for real inputs: the registered function hands those on.
"""

from __future__ import annotations

# The ops a complex value may reach, each written on the pair layout here.
_READERS = ("aten::mul", "aten::unsqueeze", "aten::slice", "aten::to",
            "aten::view_as_real")
# A complex type's parts, as ONNX's TensorProto type numbers.
_REAL_OF = {"ComplexFloat": 1, "ComplexDouble": 11, "ComplexHalf": 10}


def _is_complex(value) -> bool:
    import torch
    t = value.type()
    return isinstance(t, torch._C.TensorType) and \
        (t.scalarType() or "").startswith("Complex")


def _original_inputs(g):
    return list(g.original_node.inputs())


def _base(name, opset):
    """The exporter's own symbolic of ``name`` at ``opset`` (the one a
    custom registration overrides)."""
    from torch.onnx._internal.torchscript_exporter import registration
    base = registration.registry.get_function_group(name)._functions._base
    version = registration._dispatch_opset_version(opset, list(base))
    return base[version]


def _const(g, values):
    import torch
    return g.op("Constant", value_t=torch.tensor(values, dtype=torch.int64))


def _refuse(g, op, why, value):
    from torch.onnx import symbolic_helper
    return symbolic_helper._unimplemented(op, why, value)


def _unwritten_reader(value):
    """The first op reading the complex ``value`` (or a complex value it
    leads to before ``view_as_real``) that is not written on the pair
    layout, as 'kind (scope)', or None."""
    todo, seen = [value], set()
    while todo:
        v = todo.pop()
        if v.unique() in seen:
            continue
        seen.add(v.unique())
        for use in v.uses():
            node = use.user
            if node.kind() not in _READERS:
                return f"{node.kind()} ({node.scopeName() or 'the graph'})"
            todo.extend(o for o in node.outputs() if _is_complex(o))
    return None


def _check_readers(g, op, out, value):
    reader = _unwritten_reader(g.original_node.output())
    if reader is not None:
        return _refuse(
            g, op, f"its complex value reaches {reader}, which "
            "rp.onnx_symbolics does not write on real/imaginary pairs (it "
            "writes mul, unsqueeze, slice, to and view_as_real of complex "
            "values: complex rotary tables)", value)
    return out


def _pair(g, re, im):
    last = _const(g, [-1])
    return g.op("Concat", g.op("Unsqueeze", re, last),
                g.op("Unsqueeze", im, last), axis_i=-1)


def polar(g, radius, angle):
    out = _pair(g, g.op("Mul", radius, g.op("Cos", angle)),
                g.op("Mul", radius, g.op("Sin", angle)))
    return _check_readers(g, "aten::polar", out, radius)


def view_as_complex(g, x):
    return _check_readers(g, "aten::view_as_complex", g.op("Identity", x), x)


def view_as_real(g, z):
    return g.op("Identity", z)


def _halves(g, z):
    """The real and the imaginary part, each keeping the pair axis as 1."""
    axis = _const(g, [-1])
    return (g.op("Slice", z, _const(g, [0]), _const(g, [1]), axis),
            g.op("Slice", z, _const(g, [1]), _const(g, [2]), axis))


def mul(g, a, b):
    ia, ib = _original_inputs(g)[:2]
    ca, cb = _is_complex(ia), _is_complex(ib)
    if not (ca or cb):
        return _base("aten::mul", g.opset)(g, a, b)
    if ca and cb:
        ar, ai = _halves(g, a)
        br, bi = _halves(g, b)
        re = g.op("Sub", g.op("Mul", ar, br), g.op("Mul", ai, bi))
        im = g.op("Add", g.op("Mul", ar, bi), g.op("Mul", ai, br))
        return g.op("Concat", re, im, axis_i=-1)
    z, r, orig = (a, b, ib) if ca else (b, a, ia)
    r = g.op("CastLike", r, z)
    import torch
    t = orig.type()
    if isinstance(t, torch._C.TensorType) and (t.dim() or 0) > 0:
        # A real tensor multiplies both parts: broadcast over the pair.
        r = g.op("Unsqueeze", r, _const(g, [-1]))
    return g.op("Mul", z, r)


def _shifted_dim(g, dim):
    """A negative dim of a complex tensor, moved past the pair axis, as a
    new constant (None when the dim is not a constant)."""
    from torch.onnx import symbolic_helper
    d = symbolic_helper._maybe_get_const(dim, "i")
    if not isinstance(d, int):
        return None
    import torch
    return g.op("Constant", value_t=torch.tensor(d - 1 if d < 0 else d))


def unsqueeze(g, z, dim):
    if not _is_complex(_original_inputs(g)[0]):
        return _base("aten::unsqueeze", g.opset)(g, z, dim)
    new = _shifted_dim(g, dim)
    if new is None:
        return _refuse(g, "aten::unsqueeze", "the dim of a complex tensor "
                       "must be known at export (rp.onnx_symbolics)", z)
    return _base("aten::unsqueeze", g.opset)(g, z, new)


def slice_(g, z, *args):
    if not _is_complex(_original_inputs(g)[0]):
        return _base("aten::slice", g.opset)(g, z, *args)
    new = _shifted_dim(g, args[0]) if args else None
    if new is None:
        return _refuse(g, "aten::slice", "the dim of a complex tensor must "
                       "be known at export (rp.onnx_symbolics)", z)
    return _base("aten::slice", g.opset)(g, z, new, *args[1:])


def to(g, z, *args):
    if not _is_complex(_original_inputs(g)[0]):
        return _base("aten::to", g.opset)(g, z, *args)
    want = g.original_node.output().type().scalarType()
    real = _REAL_OF.get(want)
    if real is None:
        return _refuse(g, "aten::to", f"a complex tensor cast to {want} "
                       "(rp.onnx_symbolics writes casts between complex "
                       "types only)", z)
    return g.op("Cast", z, to_i=real)


SYMBOLICS = (("aten::polar", polar), ("aten::view_as_complex",
             view_as_complex), ("aten::view_as_real", view_as_real),
             ("aten::mul", mul), ("aten::unsqueeze", unsqueeze),
             ("aten::slice", slice_), ("aten::to", to))
