"""``tril``/``triu`` of run-time tensors and ``linalg_solve_triangular``
with a unit diagonal, as the chunked gated
delta rule calls it (Qwen3-Next, Qwen3.5, Olmo-Hybrid, Lara: the UT
transform, ``solve_triangular(A, B, upper=False, unitriangular=True)``),
written as matmuls whose VJPs give PyTorch's gradient.

A unit lower-triangular A is I - N with N = -tril(A, -1) nilpotent
(N^n = 0 for n x n), so A^-1 = I + N + ... + N^(n-1)
= (I + N)(I + N^2)(I + N^4)...: ceil(log2 n) factors, each applied to B as
X + P @ X, with P squared between them. The same polynomial of A that
forward substitution evaluates, so the gradient is PyTorch's (zero on A's
diagonal and other triangle, which the solve never reads); only the
rounding order differs."""

from __future__ import annotations

import math

from rp._irtext import _UNSUPPORTED


def _solve_triangular(e, n):
    import torch
    a, b = n.args[:2]
    kw = dict(zip(("upper", "left", "unitriangular"), n.args[2:]))
    kw.update(n.kwargs)
    upper, left = kw.get("upper"), kw.get("left", True)
    if upper is None or not left or not kw.get("unitriangular", False):
        return _UNSUPPORTED
    dt = e.values[n].dtype
    sa, sb = list(e.values[a].shape), list(e.values[b].shape)
    size = sa[-1]
    if not dt.is_floating_point or sa[:-2] != sb[:-2] or sa[-2] != size:
        return _UNSUPPORTED
    av, bv = e.val(a, dt), e.val(b, dt)
    at, bt = e.ty(av), e.ty(bv)
    # -1 strictly inside the triangle the solve reads, 0 elsewhere.
    mask = torch.ones(size, size, dtype=dt)
    mv = e.constant(-(torch.triu(mask, 1) if upper else torch.tril(mask, -1)))
    nv = e.emit(f"rp.mul {av}, {mv} : ({at}, {e.ty(mv)}) -> {at}", at)

    def matmul(x, y, ty):
        return e.emit(f"rp.matmul {x}, {y} : ({e.ty(x)}, {e.ty(y)}) -> {ty}",
                      ty)
    x, p = bv, nv
    steps = math.ceil(math.log2(size)) if size > 1 else 0
    for i in range(steps):
        px = matmul(p, x, bt)
        x = e.emit(f"rp.add {x}, {px} : ({bt}, {bt}) -> {bt}", bt)
        if i + 1 < steps:
            p = matmul(p, p, at)
    return x


def _triangle(upper):
    """tril / triu of a run-time tensor: a where on a constant triangle
    (the gated delta rule's masks; the gradient is zero outside it)."""
    def h(e, n):
        import torch
        x = n.args[0]
        k = n.args[1] if len(n.args) > 1 else n.kwargs.get("diagonal", 0)
        shape = list(e.values[x].shape)
        if len(shape) < 2:
            return _UNSUPPORTED
        ones = torch.ones(shape[-2:], dtype=torch.bool)
        keep = e.constant(torch.triu(ones, k) if upper else
                          torch.tril(ones, k))
        dt = e.values[n].dtype
        xv, zero, ty = e.val(x, dt), e.scalar(0, dt), e.out_type(n)
        return e.emit(f"rp.where {keep}, {xv}, {zero} : ({e.ty(keep)}, "
                      f"{e.ty(xv)}, {e.ty(zero)}) -> {ty}", ty)
    return h


HANDLERS = {"linalg_solve_triangular": _solve_triangular,
            "tril": _triangle(False), "triu": _triangle(True)}
