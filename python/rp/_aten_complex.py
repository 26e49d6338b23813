"""Complex tensors as rp ops, for rotary embeddings written with complex
numbers (DeepSeek-V2's and Llama 4's ``view_as_complex(x) * freqs_cis``):
rp has no complex element type, so a complex value of shape [..., D] is
carried as its real view, a float tensor [..., D, 2] (real part, imaginary
part), as ``view_as_real`` lays it out. ``view_as_complex`` and
``view_as_real`` are then the identity, and a complex product is four real
ones: (a + bi)(c + di) = (ac - bd) + (ad + bc)i, whose VJPs give PyTorch's
gradient through the real view. A complex constant (the rotary table,
folded at trace time) splits into two float constants."""

from __future__ import annotations

from rp import _aten
from rp._aten_movement import _slice_text
from rp._irtext import _UNSUPPORTED, _ttype


def _real_view_type(e, n):
    import torch
    v = e.values[n]
    dt = torch.float64 if v.dtype == torch.complex128 else torch.float32
    return list(v.shape) + [2], dt


def _view_as_complex(e, n):
    import torch
    x = n.args[0]
    if e.values[x].dtype not in (torch.float32, torch.float64):
        return _UNSUPPORTED
    return e.val(x)


def _view_as_real(e, n):
    import torch
    c = n.args[0]
    if not isinstance(c, torch.fx.Node) or not e.values[c].dtype.is_complex:
        return _UNSUPPORTED
    if c in e.const_nodes and not e.is_large(c):
        return e.constant(torch.view_as_real(e.values[c]).contiguous())
    return e.val(c)


def _parts(e, a, shape, dt):
    """The real and imaginary parts of complex operand ``a`` as [..., 1]
    float tensors (a constant splits at trace time)."""
    import torch
    if a in e.const_nodes and not e.is_large(a):
        v = e.values[a]
        return tuple(e.constant(p.to(dt).unsqueeze(-1).contiguous())
                     for p in (v.real, v.imag))
    rv = e.val(a)
    full = list(e.values[a].shape)
    half = _ttype(full + [1], dt)
    return tuple(_slice_text(e, rv, [0] * len(full) + [i],
                             [1] * (len(full) + 1), half) for i in (0, 1))


def _complex_mul(e, n):
    import torch
    a, b = n.args[0], n.args[1]
    if not all(isinstance(v, torch.fx.Node) and e.values[v].dtype.is_complex
               for v in (a, b)):
        return _UNSUPPORTED
    shape, dt = _real_view_type(e, n)
    ar, ai = _parts(e, a, shape, dt)
    br, bi = _parts(e, b, shape, dt)
    half = _ttype(shape[:-1] + [1], dt)

    def op(name, x, y):
        return e.emit(f"rp.{name} {x}, {y} : ({e.ty(x)}, {e.ty(y)}) -> "
                      f"{half}", half)
    re = op("sub", op("mul", ar, br), op("mul", ai, bi))
    im = op("add", op("mul", ar, bi), op("mul", ai, br))
    ty = _ttype(shape, dt)
    return e.emit(f"rp.concat {re}, {im} dim = {len(shape) - 1} : ({half}, "
                  f"{half}) -> {ty}", ty)


_REAL_MUL = _aten.HANDLERS["mul"]


def _mul(e, n):
    if getattr(e.values[n], "is_complex", lambda: False)():
        return _complex_mul(e, n)
    return _REAL_MUL(e, n)


HANDLERS = {"view_as_complex": _view_as_complex,
            "view_as_real": _view_as_real, "mul": _mul}
