"""ATen's views, slices and joins -> rp op text (the handler contract:
rp._aten): reshapes and expands, transposes and permutes, slice, select,
split, unbind and cat, and the text helpers for rp.reshape, rp.transpose
and rp.slice that the other handler modules share."""

from __future__ import annotations

from rp._irtext import _dim, _opname, _ttype


def _reshape(e, n):
    x = e.val(n.args[0])
    ty = e.out_type(n)
    if e.ty(x) == ty:
        return x
    return e.emit(f"rp.reshape {x} : {e.ty(x)} to {ty}", ty)


def _expand(e, n):
    x = e.val(n.args[0])
    ty = e.out_type(n)
    if e.ty(x) == ty:
        return x
    return e.emit(f"rp.broadcast {x} : {e.ty(x)} to {ty}", ty)


def _permute_to(e, x, perm, ty):
    if list(perm) == sorted(perm):
        return x
    return e.emit(f"rp.transpose {x} permutation = [{', '.join(map(str, perm))}] : "
                  f"{e.ty(x)} -> {ty}", ty)


def _transpose(e, n):
    src = n.args[0]
    rank = e.values[src].dim()
    perm = list(range(rank))
    if _opname(n) == "t":
        if rank < 2:
            return e.val(src)
        perm = [1, 0]
    else:
        a, b = _dim(n.args[1], rank), _dim(n.args[2], rank)
        perm[a], perm[b] = perm[b], perm[a]
    return _permute_to(e, e.val(src), perm, e.out_type(n))


def _permute(e, n):
    src = n.args[0]
    rank = e.values[src].dim()
    perm = [_dim(d, rank) for d in n.args[1]]
    return _permute_to(e, e.val(src), perm, e.out_type(n))


def _slice_text(e, x, offsets, strides, ty):
    return e.emit(f"rp.slice {x} offsets = [{', '.join(map(str, offsets))}] "
                  f"strides = [{', '.join(map(str, strides))}] : {e.ty(x)} -> {ty}", ty)


def _slice(e, n):
    src = n.args[0]
    shape = list(e.values[src].shape)
    rank = len(shape)
    dim = _dim(n.args[1] if len(n.args) > 1 else 0, rank)
    start = n.args[2] if len(n.args) > 2 else None
    step = n.args[4] if len(n.args) > 4 else 1
    start = 0 if start is None else start
    if start < 0:
        start += shape[dim]
    start = max(0, min(start, shape[dim]))
    x = e.val(src)
    ty = e.out_type(n)
    if ty == e.ty(x) and start == 0 and step == 1:
        return x
    offsets = [0] * rank
    strides = [1] * rank
    offsets[dim] = start
    strides[dim] = step
    return _slice_text(e, x, offsets, strides, ty)


def _select(e, n):
    src, dim, idx = n.args
    shape = list(e.values[src].shape)
    rank = len(shape)
    dim = _dim(dim, rank)
    idx = idx + shape[dim] if idx < 0 else idx
    x = e.val(src)
    offsets = [0] * rank
    offsets[dim] = idx
    kept = list(shape)
    kept[dim] = 1
    dt = e.values[src].dtype
    s = _slice_text(e, x, offsets, [1] * rank, _ttype(kept, dt))
    ty = e.out_type(n)
    return e.emit(f"rp.reshape {s} : {e.ty(s)} to {ty}", ty)


def _split(e, n):
    src = n.args[0]
    shape = list(e.values[src].shape)
    rank = len(shape)
    dim = _dim(n.args[2] if len(n.args) > 2 else n.kwargs.get("dim", 0), rank)
    outs = e.values[n]
    x = e.val(src)
    dt = e.values[src].dtype
    items = []
    off = 0
    for o in outs:
        size = o.shape[dim]

        def thunk(off=off, o=o):
            offsets = [0] * rank
            offsets[dim] = off
            ty = _ttype(o.shape, dt)
            if ty == e.ty(x):
                return x
            return _slice_text(e, x, offsets, [1] * rank, ty)
        items.append(thunk)
        off += size
    return tuple(items)


def _unbind(e, n):
    src = n.args[0]
    shape = list(e.values[src].shape)
    rank = len(shape)
    dim = _dim(n.args[1] if len(n.args) > 1 else 0, rank)
    x = e.val(src)
    dt = e.values[src].dtype
    items = []
    for i, o in enumerate(e.values[n]):
        def thunk(i=i, o=o):
            offsets = [0] * rank
            offsets[dim] = i
            kept = list(shape)
            kept[dim] = 1
            s = _slice_text(e, x, offsets, [1] * rank, _ttype(kept, dt))
            ty = _ttype(o.shape, dt)
            return e.emit(f"rp.reshape {s} : {e.ty(s)} to {ty}", ty)
        items.append(thunk)
    return tuple(items)


def _cat(e, n):
    tensors = n.args[0]
    dt = e.values[n].dtype
    rank = e.values[n].dim()
    dim = _dim(n.args[1] if len(n.args) > 1 else n.kwargs.get("dim", 0), rank)
    xs = [e.val(t, dt) for t in tensors if e.values[t].numel() > 0]
    ty = e.out_type(n)
    if len(xs) == 1:
        return xs[0]
    return e.emit(f"rp.concat {', '.join(xs)} dim = {dim} : "
                  f"({', '.join(e.ty(x) for x in xs)}) -> {ty}", ty)


def _unfold(e, n):
    """x.unfold(dim, size, step): every window of `size` along `dim`, step
    `step` apart, as a new last dimension (Inkling2's short convolution
    reads its causal windows so). One strided slice per offset in the
    window, each the window's j-th element of every window, concatenated
    along the new last dimension."""
    src, dim, size, step = n.args[:4]
    shape = list(e.values[src].shape)
    rank = len(shape)
    dt = e.values[src].dtype
    ty = e.out_type(n)
    x = e.val(src)
    if rank == 0:  # a scalar's one window of one
        return _reshape_text(e, x, ty)
    dim = _dim(dim, rank)
    part = list(shape)
    part[dim] = e.values[n].shape[dim]
    strides = [1] * rank
    strides[dim] = step
    cols = []
    for j in range(size):
        offsets = [0] * rank
        offsets[dim] = j
        s = _slice_text(e, x, offsets, strides, _ttype(part, dt))
        cols.append(_reshape_text(e, s, _ttype(part + [1], dt)))
    if len(cols) == 1:
        return cols[0]
    return e.emit(f"rp.concat {', '.join(cols)} dim = {rank} : "
                  f"({', '.join(e.ty(c) for c in cols)}) -> {ty}", ty)


def _flip(e, n):
    """x.flip(dims) (Inkling2's windows, newest first): per dimension a
    gather of the constant indices n-1 .. 0, as rp-import writes a
    negative-step Slice."""
    import torch
    src = n.args[0]
    shape = list(e.values[src].shape)
    rank = len(shape)
    dt = e.values[src].dtype
    x = e.val(src)
    for d in sorted({_dim(d, rank) for d in n.args[1]}):
        if shape[d] <= 1:
            continue
        idx = e.constant(torch.arange(shape[d] - 1, -1, -1))
        ty = _ttype(shape, dt)
        x = e.emit(f"rp.gather {x}[{idx}] axis = {d} : ({e.ty(x)}, "
                   f"{e.ty(idx)}) -> {ty}", ty)
    return x


def _reshape_text(e, x, ty):
    if e.ty(x) == ty:
        return x
    return e.emit(f"rp.reshape {x} : {e.ty(x)} to {ty}", ty)


HANDLERS = {
    "view": _reshape, "_unsafe_view": _reshape, "_reshape_alias": _reshape,
    "reshape": _reshape, "unsqueeze": _reshape, "squeeze": _reshape,
    "flatten": _reshape, "view_as": _reshape,
    "expand": _expand,
    "t": _transpose, "transpose": _transpose, "permute": _permute,
    "slice": _slice, "select": _select, "split": _split,
    "split_with_sizes": _split, "unbind": _unbind, "cat": _cat,
    "unfold": _unfold, "flip": _flip,
}
