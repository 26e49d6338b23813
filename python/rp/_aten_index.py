"""ATen's advanced indexing as rp ops: ``x[idx]``, ``x[:, :, idx]`` (one
index tensor, every other position ``None``) is an rp.gather along that
axis, whose VJP scatter-adds into the rows read (repeated indices
accumulate, as PyTorch's index backward). Whisper's learned positions
(``weight[position_ids]``) and Falcon's rotary slice take this form.

A boolean mask over the leading dims computed from constants alone
(X-MOD's language of each sequence, from the config's default language)
selects rows known at trace time: ``x[mask]`` is the gather of those
rows, and ``x[mask] = v`` (index_put) a gather of ``v`` into every row
kept by an rp.where on the mask. A mask computed from the inputs selects
a data-dependent number of rows, which a static graph cannot express."""

from __future__ import annotations

from rp._irtext import _UNSUPPORTED, _ttype


def _mask(e, indices):
    """(mask tensor, dims it covers) of a leading constant boolean mask
    index, or None."""
    import torch
    if len(indices) != 1 or not isinstance(indices[0], torch.fx.Node):
        return None
    m = indices[0]
    if e.values[m].dtype != torch.bool or m not in e.const_nodes:
        return None
    return e.values[m], e.values[m].dim()


def _rows(e, x, k):
    """ssa of ``x`` with its first ``k`` dims flattened into one."""
    xs = list(e.values[x].shape)
    xv = e.val(x)
    if k == 1:
        return xv, xs
    n = 1
    for s in xs[:k]:
        n *= s
    ty = _ttype([n] + xs[k:], e.values[x].dtype)
    return e.emit(f"rp.reshape {xv} : {e.ty(xv)} to {ty}", ty), xs


def _gather(e, xv, iv, ty):
    return e.emit(f"rp.gather {xv}[{iv}] axis = 0 : ({e.ty(xv)}, "
                  f"{e.ty(iv)}) -> {ty}", ty)


def _index_mask(e, n, mask, k):
    import torch
    if list(mask.shape) != list(e.values[n.args[0]].shape[:k]):
        return _UNSUPPORTED
    xv, _ = _rows(e, n.args[0], k)
    kept = torch.nonzero(mask.reshape(-1)).flatten()
    return _gather(e, xv, e.constant(kept), e.out_type(n))


def _index(e, n):
    import torch
    x, indices = n.args[0], list(n.args[1])
    found = _mask(e, indices)
    if found is not None:
        return _index_mask(e, n, *found)
    given = [i for i, t in enumerate(indices) if t is not None]
    if len(given) != 1:
        return _UNSUPPORTED
    axis = given[0]
    idx = indices[axis]
    if not isinstance(idx, torch.fx.Node) or \
            e.values[idx].dtype not in (torch.int64, torch.int32):
        return _UNSUPPORTED
    xv, iv = e.val(x), e.val(idx, torch.int64)
    ty = e.out_type(n)
    return e.emit(f"rp.gather {xv}[{iv}] axis = {axis} : ({e.ty(xv)}, "
                  f"{e.ty(iv)}) -> {ty}", ty)


def _index_put(e, n):
    """``x[mask] = v`` (accumulate off) with a constant boolean mask over
    x's leading dims and ``v`` one row per kept position: each row of x
    is v's row for it (a gather by a constant map) where the mask holds,
    x's own elsewhere. Gradients: v's rows by the gather's VJP, x's where
    the mask does not hold, as PyTorch's."""
    import torch
    x, indices, v = n.args[:3]
    accumulate = n.args[3] if len(n.args) > 3 else \
        n.kwargs.get("accumulate", False)
    found = _mask(e, list(indices))
    if found is None or accumulate or not isinstance(v, torch.fx.Node):
        return _UNSUPPORTED
    mask, k = found
    xs = list(e.values[x].shape)
    kept = torch.nonzero(mask.reshape(-1)).flatten()
    want = [len(kept)] + xs[k:]
    vs = list(e.values[v].shape)
    # v broadcasts to the kept rows; only where that adds leading unit
    # dims (one kept row: X-MOD's one sequence) is it the same elements.
    if list(mask.shape) != xs[:k] or vs != want[len(want) - len(vs):] or \
            any(d != 1 for d in want[:len(want) - len(vs)]):
        return _UNSUPPORTED
    dt = e.values[n].dtype
    xv, _ = _rows(e, x, k)
    rows_ty = e.ty(xv)
    vv = e.val(v, dt)
    if vs != want:
        wt = _ttype(want, dt)
        vv = e.emit(f"rp.reshape {vv} : {e.ty(vv)} to {wt}", wt)
    nrows = mask.numel()
    src = torch.zeros(nrows, dtype=torch.int64)
    src[kept] = torch.arange(len(kept))
    picked = _gather(e, vv, e.constant(src), rows_ty)
    full = mask.reshape([nrows] + [1] * (len(xs) - k)).expand(
        [nrows] + xs[k:]).contiguous()
    mv = e.constant(full)
    y = e.emit(f"rp.where {mv}, {picked}, {xv} : ({e.ty(mv)}, {rows_ty}, "
               f"{rows_ty}) -> {rows_ty}", rows_ty)
    ty = e.out_type(n)
    if ty != rows_ty:
        y = e.emit(f"rp.reshape {y} : {rows_ty} to {ty}", ty)
    return y


HANDLERS = {"index": _index, "index_put": _index_put}
