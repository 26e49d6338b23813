"""Reductions and a selection rp has no op of its own for, written as
compositions of rp ops whose VJPs give PyTorch's gradients, for the
families that need them (docs/models.md): ``logsumexp`` (GraniteSWA's
attention sinks), ``linalg_vector_norm`` of order 2 (Zaya's q/k
L2-norm), ``sum`` with a ``dtype`` (DiffLlama's lambdas) and
``index_select`` (XLNet's relative shift), ``var`` and ``std`` with a
correction (Gemma 3n's activation sparsity: a Gaussian top-k cut at the
mean plus a multiple of the standard deviation)."""

from __future__ import annotations

from rp import _aten, _aten_pad
from rp._irtext import _UNSUPPORTED, _dim, _ttype


def _dims(e, x, dims):
    rank = e.values[x].dim()
    if dims is None:
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    dims = list(dims) or list(range(rank))
    return sorted({_dim(d, rank) for d in dims})


def _reduce(e, kind, v, dims, keep, dt):
    """rp.reduce of ssa ``v`` over ``dims``; its result type."""
    shape = [1 if i in dims else s for i, s in enumerate(_shape(e, v))]
    if not keep:
        shape = [s for i, s in enumerate(_shape(e, v)) if i not in dims]
    ty = _ttype(shape, dt)
    kd = " keep_dims" if keep else ""
    return e.emit(f"rp.reduce {kind} {v} dims = [{', '.join(map(str, dims))}]"
                  f"{kd} : {e.ty(v)} -> {ty}", ty)


def _shape(e, v):
    """The static shape of ssa ``v`` from its tensor type text."""
    inner = e.ty(v)[len("tensor<"):-1]
    return [int(d) for d in inner.split("x")[:-1]]


def _binary(e, op, a, b, ty):
    return e.emit(f"rp.{op} {a}, {b} : ({e.ty(a)}, {e.ty(b)}) -> {ty}", ty)


def _logsumexp(e, n):
    """m + log(sum(exp(x - m))), m the max over the dims kept as unit dims
    (so nothing overflows). m's own gradient cancels: the softmax weights
    the VJP of the log-sum gives sum to one. A row all -inf takes m = 0
    there, so it is -inf, as PyTorch's, rather than NaN."""
    import torch
    x = n.args[0]
    dims = _dims(e, x, n.args[1] if len(n.args) > 1 else n.kwargs.get("dim"))
    dt = e.values[n].dtype
    if not dt.is_floating_point:
        return _UNSUPPORTED
    xv = e.val(x, dt)
    xt = e.ty(xv)
    m = _reduce(e, "max", xv, dims, True, dt)
    mt = e.ty(m)
    bt = _ttype(_shape(e, m), torch.bool)
    inf = e.scalar(float("-inf"), dt)
    masked = e.emit(f"rp.cmp eq, {m}, {inf} : ({mt}, {e.ty(inf)}) -> {bt}",
                    bt)
    zero = e.scalar(0.0, dt)
    m = e.emit(f"rp.where {masked}, {zero}, {m} : ({bt}, {e.ty(zero)}, {mt})"
               f" -> {mt}", mt)
    ex = e.emit(f"rp.exp {_binary(e, 'sub', xv, m, xt)} : {xt}", xt)
    s = _reduce(e, "sum", ex, dims, True, dt)
    y = _binary(e, "add", e.emit(f"rp.log {s} : {mt}", mt), m, mt)
    ty = e.out_type(n)
    if ty != mt:  # keepdim=False: the unit dims dropped
        y = e.emit(f"rp.reshape {y} : {mt} to {ty}", ty)
    return y


def _vector_norm(e, n):
    """torch.linalg.vector_norm / Tensor.norm (torch 1's aten.norm, same
    argument order) of order 2: sqrt of the sum
    of squares (PyTorch's gradient x / norm; at a zero norm PyTorch's is 0
    and this one NaN, as for any sqrt at 0); of order 1: the sum of
    absolute values (gradient sign(x), 0 at 0 as PyTorch's)."""
    x = n.args[0]
    ord_ = n.args[1] if len(n.args) > 1 else n.kwargs.get("ord", 2)
    dims = _dims(e, x, n.args[2] if len(n.args) > 2 else n.kwargs.get("dim"))
    keep = n.args[3] if len(n.args) > 3 else n.kwargs.get("keepdim", False)
    dt = e.values[n].dtype
    if ord_ not in (1, 2) or not dt.is_floating_point:
        return _UNSUPPORTED
    xv = e.val(x, dt)
    if ord_ == 1:  # DBRX's router weights over their L1 norm
        a = _aten_pad.abs_value(e, xv, _shape(e, xv), dt)
        return _reduce(e, "sum", a, dims, keep, dt)
    sq = _binary(e, "mul", xv, xv, e.ty(xv))
    s = _reduce(e, "sum", sq, dims, keep, dt)
    return e.emit(f"rp.sqrt {s} : {e.ty(s)}", e.ty(s))


def _sum(e, n):
    """sum, also with a ``dtype``: the input cast to it, then summed. A
    bool input (a mask's count of kept tokens: CPM-Ant's lengths) sums as
    the int64 PyTorch returns."""
    dtype = n.kwargs.get("dtype")
    if dtype is None and e.values[n.args[0]].dtype == e.values[n].dtype:
        return _aten.HANDLERS["sum"](e, n)
    dtype = dtype or e.values[n].dtype
    x = n.args[0]
    dims = _dims(e, x, n.args[1] if len(n.args) > 1 else None)
    keep = n.args[2] if len(n.args) > 2 else n.kwargs.get("keepdim", False)
    return _reduce(e, "sum", e.val(x, dtype), dims, keep, dtype)


def _index_select(e, n):
    """torch.index_select: rp.gather of the one-dimensional index along
    the dim (its VJP scatter-adds: repeated indices accumulate)."""
    import torch
    x, dim, idx = n.args[:3]
    if e.values[idx].dim() != 1:
        return _UNSUPPORTED
    xv, iv = e.val(x), e.val(idx, torch.int64)
    axis = _dim(dim, e.values[x].dim())
    ty = e.out_type(n)
    return e.emit(f"rp.gather {xv}[{iv}] axis = {axis} : ({e.ty(xv)}, "
                  f"{e.ty(iv)}) -> {ty}", ty)


def _var_std(e, n):
    """var / std over dims with a correction (the divisor N - correction,
    1 when unset; unbiased=False is 0): the mean kept as unit dims, the
    sum of squared deviations, its scaled value (and its sqrt for std).
    The VJP through the mean is PyTorch's (the deviations sum to zero, so
    it adds nothing), through sqrt (x - mean) / ((N - c) std)."""
    x = n.args[0]
    dims = _dims(e, x, n.args[1] if len(n.args) > 1 else n.kwargs.get("dim"))
    corr = n.kwargs.get("correction")
    if len(n.args) > 2:  # var.dim / std.dim: unbiased as a positional bool
        corr = 1 if n.args[2] else 0
    if "unbiased" in n.kwargs:
        corr = 1 if n.kwargs["unbiased"] else 0
    corr = 1 if corr is None else corr
    keep = n.args[3] if len(n.args) > 3 else n.kwargs.get("keepdim", False)
    dt = e.values[n].dtype
    if not dt.is_floating_point or not isinstance(corr, (int, float)):
        return _UNSUPPORTED
    shape = _shape(e, e.val(x, dt))
    count = 1
    for d in dims:
        count *= shape[d]
    if count - corr <= 0:
        return _UNSUPPORTED  # PyTorch's is inf or NaN there
    xv = e.val(x, dt)
    xt = e.ty(xv)
    s = _reduce(e, "sum", xv, dims, True, dt)
    mean = _binary(e, "mul", s, e.scalar(1.0 / count, dt), e.ty(s))
    dev = _binary(e, "sub", xv, mean, xt)
    sq = _binary(e, "mul", dev, dev, xt)
    ss = _reduce(e, "sum", sq, dims, keep, dt)
    var = _binary(e, "mul", ss, e.scalar(1.0 / (count - corr), dt), e.ty(ss))
    if n.target.overloadpacket.__name__ == "std":
        return e.emit(f"rp.sqrt {var} : {e.ty(var)}", e.ty(var))
    return var


HANDLERS = {"var": _var_std, "std": _var_std, "logsumexp": _logsumexp,
            "linalg_vector_norm": _vector_norm, "norm": _vector_norm,
            "sum": _sum, "index_select": _index_select}
