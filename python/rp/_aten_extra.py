"""ATen ops of torch 2's models beyond rp._aten's: the functional form of
a write into a slice (rp._capture rewrites ``base[..., a:b].copy_(src)``,
as DeepSeek's MLA attention assembles its keys, into
``_rp_slice_scatter``), the ``new_empty`` tensor such writes fill, and
``_safe_softmax`` (scaled_dot_product_attention's math path), and
``stack``."""

from __future__ import annotations

from rp._aten_movement import _slice_text
from rp._irtext import _dim, _ttype


def _new_empty(e, n):
    """A tensor whose every element the model writes before reading (its
    values are undefined in PyTorch): zeros, a broadcast splat."""
    ty = e.out_type(n)
    z = e.scalar(0, e.values[n].dtype)
    return e.emit(f"rp.broadcast {z} : {e.ty(z)} to {ty}", ty)


def _slice_scatter(e, n):
    """_capture's functional form of base[..., a:b].copy_(src) (or of
    base.select(dim, a).copy_(src)): a concat of base's parts around src
    (broadcast to the slice)."""
    base, src, dim, start, end = n.args[:5]
    select = len(n.args) > 5 and n.args[5]
    shape = list(e.values[base].shape)
    rank = len(shape)
    dim = _dim(dim, rank)
    size = shape[dim]
    start = 0 if start is None else (start + size if start < 0 else start)
    end = size if end is None else min(end + size if end < 0 else end, size)
    dt = e.values[n].dtype
    b = e.val(base)
    parts = []
    for lo, hi in ((0, start), (end, size)):
        if hi > lo:
            part = list(shape)
            part[dim] = hi - lo
            offsets = [0] * rank
            offsets[dim] = lo
            parts.append((lo, _slice_text(e, b, offsets, [1] * rank,
                                          _ttype(part, dt))))
    mid = list(shape)
    mid[dim] = end - start
    s = e.val(src, dt)
    mty = _ttype(mid, dt)
    if select:
        # The selected row ([.., 1, ..] without its unit dim) broadcast,
        # then given the unit dim back.
        row = mid[:dim] + mid[dim + 1:]
        rty = _ttype(row, dt)
        if e.ty(s) != rty:
            s = e.emit(f"rp.broadcast {s} : {e.ty(s)} to {rty}", rty)
        s = e.emit(f"rp.reshape {s} : {rty} to {mty}", mty)
    if e.ty(s) != mty:
        s = e.emit(f"rp.broadcast {s} : {e.ty(s)} to {mty}", mty)
    parts.append((start, s))
    xs = [p for _, p in sorted(parts, key=lambda t: t[0])]
    ty = e.out_type(n)
    if len(xs) == 1:
        return xs[0]
    return e.emit(f"rp.concat {', '.join(xs)} dim = {dim} : "
                  f"({', '.join(e.ty(x) for x in xs)}) -> {ty}", ty)


def _safe_softmax(e, n):
    """torch 2's attention softmax: a softmax whose rows that are all -inf
    (fully masked) are zeros rather than NaN."""
    import torch
    x, dim = n.args[0], n.args[1]
    dt = e.values[n].dtype
    xv = e.val(x, dt)
    shape = list(e.values[n].shape)
    d = _dim(dim, len(shape))
    ty = e.out_type(n)
    sm = e.emit(f"rp.softmax {xv} dim = {d} : {ty}", ty)
    keep = list(shape)
    keep[d] = 1
    kt = _ttype(keep, dt)
    m = e.emit(f"rp.reduce max {xv} dims = [{d}] keep_dims : {ty} -> {kt}", kt)
    ninf = e.scalar(float("-inf"), dt)
    bt = _ttype(keep, torch.bool)
    masked = e.emit(f"rp.cmp eq, {m}, {ninf} : ({kt}, {e.ty(ninf)}) -> {bt}",
                    bt)
    zero = e.scalar(0.0, dt)
    return e.emit(f"rp.where {masked}, {zero}, {sm} : ({bt}, {e.ty(zero)}, "
                  f"{ty}) -> {ty}", ty)


def _stack(e, n):
    """torch.stack: each tensor with a unit dimension at ``dim``, joined
    along it (interleaved rotary embeddings stack their halves)."""
    tensors = n.args[0]
    dt = e.values[n].dtype
    out = list(e.values[n].shape)
    dim = _dim(n.args[1] if len(n.args) > 1 else n.kwargs.get("dim", 0),
               len(out))
    one = list(out)
    one[dim] = 1
    ut = _ttype(one, dt)
    xs = []
    for t in tensors:
        x = e.val(t, dt)
        if e.ty(x) != ut:
            x = e.emit(f"rp.reshape {x} : {e.ty(x)} to {ut}", ut)
        xs.append(x)
    ty = e.out_type(n)
    if len(xs) == 1:
        return xs[0]
    return e.emit(f"rp.concat {', '.join(xs)} dim = {dim} : "
                  f"({', '.join(e.ty(x) for x in xs)}) -> {ty}", ty)


HANDLERS = {"stack": _stack, "new_empty": _new_empty,
            "_rp_slice_scatter": _slice_scatter,
            "_safe_softmax": _safe_softmax}
