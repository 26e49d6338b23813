"""ATen ops rp has no op of its own for, written as compositions of rp ops
whose VJPs give PyTorch's gradients: ``softplus``, ``log_sigmoid``
(Inkling's router), ``expm1`` and
``reciprocal`` (Mamba's and the gated delta nets' step sizes, XIELU,
Zaya's q/k norm), ``cumsum`` (RoBERTa's
position ids), ``gather`` along the last axis (a router's chosen scores),
``clamp``, ``repeat`` (a concat of copies) and ``topk`` along the last
axis (an MoE router's choice: rp.moe.route picks the indices, the values
are read back through a one-hot mask so their gradient reaches the
scores)."""

from __future__ import annotations

from rp._irtext import _UNSUPPORTED, _dim, _opname, _ttype


def _softplus(e, n):
    """log(1 + exp(beta x)) / beta, and x where beta x > threshold (as
    PyTorch). exp reads min(beta x, threshold) so that neither branch
    overflows: a NaN in the unselected branch would still reach the
    gradient."""
    import torch
    x = n.args[0]
    beta = n.args[1] if len(n.args) > 1 else n.kwargs.get("beta", 1)
    thr = n.args[2] if len(n.args) > 2 else n.kwargs.get("threshold", 20)
    dt = e.values[n].dtype
    if not dt.is_floating_point:
        return _UNSUPPORTED
    ty = e.out_type(n)
    xv = e.val(x, dt)

    def binary(op, a, b):
        return e.emit(f"rp.{op} {a}, {b} : ({e.ty(a)}, {e.ty(b)}) -> {ty}",
                      ty)
    bx = xv if beta == 1 else binary("mul", xv, e.scalar(float(beta), dt))
    t = e.scalar(float(thr), dt)
    ex = e.emit(f"rp.exp {binary('min', bx, t)} : {ty}", ty)
    y = e.emit(f"rp.log {binary('add', ex, e.scalar(1.0, dt))} : {ty}", ty)
    if beta != 1:
        y = binary("div", y, e.scalar(float(beta), dt))
    bt = _ttype(e.values[n].shape, torch.bool)
    big = e.emit(f"rp.cmp gt, {bx}, {t} : ({ty}, {e.ty(t)}) -> {bt}", bt)
    return e.emit(f"rp.where {big}, {xv}, {y} : ({bt}, {ty}, {ty}) -> {ty}",
                  ty)


def _log_sigmoid(e, n):
    """log(sigmoid(x)) = -softplus(-x): -log(1 + exp(-x)), with exp
    reading min(-x, 20) so that it cannot overflow, and x itself where
    -x > 20 (as PyTorch's softplus threshold). Its gradient is
    sigmoid(-x), PyTorch's. The second result (the CPU kernel's buffer) has
    no use outside the backward."""
    import torch
    dt = e.values[n][0].dtype
    if not dt.is_floating_point:
        return _UNSUPPORTED
    ty = _ttype(e.values[n][0].shape, dt)
    xv = e.val(n.args[0], dt)
    nx = e.emit(f"rp.neg {xv} : {ty}", ty)
    t = e.scalar(20.0, dt)
    low = e.emit(f"rp.min {nx}, {t} : ({ty}, {e.ty(t)}) -> {ty}", ty)
    ex = e.emit(f"rp.exp {low} : {ty}", ty)
    one = e.scalar(1.0, dt)
    ex1 = e.emit(f"rp.add {ex}, {one} : ({ty}, {e.ty(one)}) -> {ty}", ty)
    lg = e.emit(f"rp.log {ex1} : {ty}", ty)
    y = e.emit(f"rp.neg {lg} : {ty}", ty)
    bt = _ttype(e.values[n][0].shape, torch.bool)
    big = e.emit(f"rp.cmp gt, {nx}, {t} : ({ty}, {e.ty(t)}) -> {bt}", bt)
    return (e.emit(f"rp.where {big}, {xv}, {y} : ({bt}, {ty}, {ty}) -> "
                   f"{ty}", ty), None)


def _cumsum(e, n):
    """The sum over j <= i along ``dim``: the input as [A, B, S] (``dim``
    moved last) times the transposed lower-triangular ones [S, S], one
    rp.matmul, then back (f32; an integer input, RoBERTa's mask of
    non-padding tokens, is exact below 2^24). A product broadcast over
    [.., j, i, ..] and reduced, as before, holds S^2 times the other
    dims: 8 GiB for Falcon-H1's 256-step Mamba chunks."""
    import math

    import torch
    x = n.args[0]
    shape = list(e.values[x].shape)
    rank = len(shape)
    d = _dim(n.args[1] if len(n.args) > 1 else n.kwargs["dim"], rank)
    size = shape[d]
    f = torch.float32 if not e.values[n].dtype.is_floating_point \
        else e.values[n].dtype
    xv = e.val(x, f)
    a, b = math.prod(shape[:d]), math.prod(shape[d + 1:])
    t3 = _ttype([a, size, b], f)
    v = e.emit(f"rp.reshape {xv} : {e.ty(xv)} to {t3}", t3)
    tt = _ttype([a, b, size], f)
    v = e.emit(f"rp.transpose {v} permutation = [0, 2, 1] : {t3} -> {tt}",
               tt)
    # out[.., i] = sum_j x[.., j] U[j, i], U upper-triangular.
    tri = e.constant(torch.triu(torch.ones(size, size, dtype=f)))
    v = e.emit(f"rp.matmul {v}, {tri} : ({tt}, {e.ty(tri)}) -> {tt}", tt)
    v = e.emit(f"rp.transpose {v} permutation = [0, 2, 1] : {tt} -> {t3}",
               t3)
    st = _ttype(shape, f)
    s = e.emit(f"rp.reshape {v} : {t3} to {st}", st)
    ty = e.out_type(n)
    if ty != st:
        s = e.emit(f"rp.cast {s} : {st} to {ty}", ty)
    return s


def _repeat(e, n):
    """torch.Tensor.repeat: a concat of copies along each repeated dim
    (new leading dims first added as ones)."""
    x, sizes = n.args[0], list(n.args[1])
    dt = e.values[n].dtype
    shape = list(e.values[x].shape)
    if len(sizes) < len(shape):
        return _UNSUPPORTED
    shape = [1] * (len(sizes) - len(shape)) + shape
    v = e.val(x, dt)
    st = _ttype(shape, dt)
    if e.ty(v) != st:
        v = e.emit(f"rp.reshape {v} : {e.ty(v)} to {st}", st)
    for d, r in enumerate(sizes):
        if r == 1:
            continue
        out = list(shape)
        out[d] *= r
        ot = _ttype(out, dt)
        v = e.emit(f"rp.concat {', '.join([v] * r)} dim = {d} : "
                   f"({', '.join([e.ty(v)] * r)}) -> {ot}", ot)
        shape = out
    return v


def _topk(e, n):
    """The k largest along the last axis, largest first: rp.moe.route
    (`softmax = after` takes the top-k of its input itself, ties ordered
    as PyTorch's CPU topk) for the indices; the values are the input where
    a one-hot of the indices is set, summed, so their gradient goes to the
    chosen elements (a where, not a product: a masked -inf times 0 would
    be NaN)."""
    import torch
    x, k = n.args[0], n.args[1]
    shape = list(e.values[x].shape)
    rank = len(shape)
    dim = n.args[2] if len(n.args) > 2 else n.kwargs.get("dim", -1)
    largest = n.args[3] if len(n.args) > 3 else n.kwargs.get("largest", True)
    if _dim(dim, rank) != rank - 1 or not largest or \
            not e.values[x].dtype.is_floating_point:
        return _UNSUPPORTED
    c = shape[-1]
    rows = 1
    for s in shape[:-1]:
        rows *= s
    dt = e.values[x].dtype
    f = torch.float32
    xv = e.val(x, f)
    ft = _ttype((rows, c), f)
    flat = e.emit(f"rp.reshape {xv} : {e.ty(xv)} to {ft}", ft)
    wt, it = _ttype((rows, k), f), _ttype((rows, k), torch.int64)
    w, ids = e.fresh(), e.fresh()
    e.region.lines.append(f"{w}, {ids} = rp.moe.route {flat} top_k = {k} "
                          f"softmax = after : {ft} -> ({wt}, {it})")
    e.types[w], e.types[ids] = wt, it
    out_shape = shape[:-1] + [k]

    def indices():
        ot = _ttype(out_shape, torch.int64)
        return e.emit(f"rp.reshape {ids} : {it} to {ot}", ot)

    def values():
        col_t = _ttype((rows, k, 1), torch.int64)
        col = e.emit(f"rp.reshape {ids} : {it} to {col_t}", col_t)
        rng = e.constant(torch.arange(c).reshape(1, 1, c))
        bt = _ttype((rows, k, c), torch.bool)
        hit = e.emit(f"rp.cmp eq, {col}, {rng} : ({col_t}, {e.ty(rng)}) -> "
                     f"{bt}", bt)
        x3t = _ttype((rows, 1, c), f)
        x3 = e.emit(f"rp.reshape {flat} : {ft} to {x3t}", x3t)
        zero = e.scalar(0.0, f)
        ht = _ttype((rows, k, c), f)
        sel = e.emit(f"rp.where {hit}, {x3}, {zero} : ({bt}, {x3t}, "
                     f"{e.ty(zero)}) -> {ht}", ht)
        v = e.emit(f"rp.reduce sum {sel} dims = [2] : {ht} -> {wt}", wt)
        ot = _ttype(out_shape, f)
        v = e.emit(f"rp.reshape {v} : {wt} to {ot}", ot)
        if dt != f:
            dst = _ttype(out_shape, dt)
            v = e.emit(f"rp.cast {v} : {ot} to {dst}", dst)
        return v
    return (values, indices)


def _expm1(e, n):
    """exp(x) - 1 (XIELU's negative branch)."""
    dt = e.values[n].dtype
    if not dt.is_floating_point:
        return _UNSUPPORTED
    ty = e.out_type(n)
    ex = e.emit(f"rp.exp {e.val(n.args[0], dt)} : {ty}", ty)
    one = e.scalar(1.0, dt)
    return e.emit(f"rp.sub {ex}, {one} : ({ty}, {e.ty(one)}) -> {ty}", ty)


def _reciprocal(e, n):
    """1 / x (Zaya's q/k norm)."""
    dt = e.values[n].dtype
    if not dt.is_floating_point:
        return _UNSUPPORTED
    ty = e.out_type(n)
    one = e.scalar(1.0, dt)
    return e.emit(f"rp.div {one}, {e.val(n.args[0], dt)} : ({e.ty(one)}, "
                  f"{ty}) -> {ty}", ty)


def _gather(e, n):
    """torch.gather along the last axis, index and input of one shape but
    that axis: out[.., j] = x[.., index[.., j]], a one-hot of the index
    selecting from x (a where, so the gradient reaches the elements read,
    summed where read twice, as PyTorch's)."""
    import torch
    x, dim, index = n.args[0], n.args[1], n.args[2]
    xs, ishape = list(e.values[x].shape), list(e.values[index].shape)
    rank = len(xs)
    if _dim(dim, rank) != rank - 1 or len(ishape) != rank or \
            xs[:-1] != ishape[:-1] or n.kwargs.get("sparse_grad"):
        return _UNSUPPORTED
    c = xs[-1]
    dt = e.values[n].dtype
    iv = e.val(index, torch.int64)
    col = _ttype(ishape + [1], torch.int64)
    ic = e.emit(f"rp.reshape {iv} : {e.ty(iv)} to {col}", col)
    rng = e.constant(torch.arange(c).reshape([1] * rank + [c]))
    bt = _ttype(ishape + [c], torch.bool)
    hit = e.emit(f"rp.cmp eq, {ic}, {rng} : ({col}, {e.ty(rng)}) -> {bt}",
                 bt)
    xv = e.val(x, dt)
    x3t = _ttype(xs[:-1] + [1, c], dt)
    x3 = e.emit(f"rp.reshape {xv} : {e.ty(xv)} to {x3t}", x3t)
    zero = e.scalar(0, dt)
    ht = _ttype(ishape + [c], dt)
    sel = e.emit(f"rp.where {hit}, {x3}, {zero} : ({bt}, {x3t}, "
                 f"{e.ty(zero)}) -> {ht}", ht)
    ty = e.out_type(n)
    return e.emit(f"rp.reduce sum {sel} dims = [{rank}] : {ht} -> {ty}", ty)


def _clamp(e, n):
    """clamp (scalar or tensor bounds), clamp_min, clamp_max: rp.max then
    rp.min with the input as lhs, so a value on a bound keeps its gradient
    (as PyTorch's)."""
    import torch
    name = _opname(n)
    x = n.args[0]
    lo = hi = None
    if name == "clamp_min":
        lo = n.args[1]
    elif name == "clamp_max":
        hi = n.args[1]
    else:
        lo = n.args[1] if len(n.args) > 1 else n.kwargs.get("min")
        hi = n.args[2] if len(n.args) > 2 else n.kwargs.get("max")
    dt = e.values[n].dtype
    ty = e.out_type(n)
    v = e.val(x, dt)
    for op, b in (("max", lo), ("min", hi)):
        if b is not None:
            # A tensor bound (PhiMoE's router, clamp.Tensor) broadcasts; it
            # gets the gradient where it binds strictly, as in PyTorch.
            c = e.val(b, dt) if isinstance(b, torch.fx.Node) else \
                e.scalar(b, dt)
            v = e.emit(f"rp.{op} {v}, {c} : ({e.ty(v)}, {e.ty(c)}) -> {ty}",
                       ty)
    return v


HANDLERS = {"softplus": _softplus, "log_sigmoid_forward": _log_sigmoid,
            "clamp": _clamp, "clamp_min": _clamp,
            "clamp_max": _clamp, "expm1": _expm1, "gather": _gather,
            "reciprocal": _reciprocal,
            "cumsum": _cumsum, "repeat": _repeat, "topk": _topk}
