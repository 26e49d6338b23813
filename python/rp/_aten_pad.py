"""ATen ops written as compositions of rp ops, for the families that need
them (docs/models.md): ``constant_pad_nd`` (RWKV's time shift, the
short-convolution padding of gated delta nets and Zaya's CCA), ``abs``
(PhiMoE's sparsemixer router), ``scatter`` of a constant or of a tensor
along the last axis (the top-k masks of DeepSeek-V3.2's sparse attention
indexer and JetMoE's router; Llama 4's router writing its top-k scores
into a row of -inf), and ``and``/``or``/``xor`` of bool masks. Each
composition's VJP is PyTorch's gradient."""

from __future__ import annotations

from rp._irtext import _UNSUPPORTED, _dim, _ttype


def _constant_pad_nd(e, n):
    """F.pad with a constant: the input between constant blocks, one
    rp.concat per padded axis (the pad list runs from the last axis
    backwards, a (before, after) pair each); a negative pad crops, an
    rp.slice first (RWKV's time shift pads one row before and crops one
    after)."""
    import torch
    x, pad = n.args[0], list(n.args[1])
    value = n.args[2] if len(n.args) > 2 else n.kwargs.get("value", 0)
    if value is None:
        return _UNSUPPORTED
    dt = e.values[n].dtype
    shape = list(e.values[x].shape)
    rank = len(shape)
    v = e.val(x, dt)
    for i in range(len(pad) // 2):
        d = rank - 1 - i
        before, after = pad[2 * i], pad[2 * i + 1]
        if before < 0 or after < 0:
            crop = [max(0, -before), max(0, -after)]
            if sum(crop) >= shape[d]:
                return _UNSUPPORTED
            offsets = [0] * rank
            offsets[d] = crop[0]
            shape[d] -= sum(crop)
            ty = _ttype(shape, dt)
            v = e.emit(f"rp.slice {v} offsets = [{', '.join(map(str, offsets))}]"
                       f" strides = [{', '.join(['1'] * rank)}] : {e.ty(v)} "
                       f"-> {ty}", ty)
            before, after = max(0, before), max(0, after)
        if not before and not after:
            continue
        parts = []
        for width in (before, None, after):
            if width is None:
                parts.append(v)
            elif width:
                block = shape[:d] + [width] + shape[d + 1:]
                parts.append(e.constant(torch.full(block, value, dtype=dt)))
        shape[d] += before + after
        ty = _ttype(shape, dt)
        v = e.emit(f"rp.concat {', '.join(parts)} dim = {d} : "
                   f"({', '.join(e.ty(p) for p in parts)}) -> {ty}", ty)
    return v


def _abs(e, n):
    """x times its sign (a constant to the gradient): PyTorch's gradient
    sign(x), 0 at 0."""
    dt = e.values[n].dtype
    if not dt.is_floating_point:
        return _UNSUPPORTED
    return abs_value(e, e.val(n.args[0], dt), e.values[n].shape, dt)


def abs_value(e, x, shape, dt):
    """|x| of ssa ``x`` (float ``dt``, ``shape``) as _abs writes it."""
    import torch
    ty = _ttype(shape, dt)
    bt = _ttype(shape, torch.bool)
    zero = e.scalar(0.0, dt)

    def cmp(pred):
        return e.emit(f"rp.cmp {pred}, {x}, {zero} : ({ty}, {e.ty(zero)}) "
                      f"-> {bt}", bt)

    def where(c, a, b):
        return e.emit(f"rp.where {c}, {a}, {b} : ({bt}, {e.ty(a)}, "
                      f"{e.ty(b)}) -> {ty}", ty)
    sign = where(cmp("gt"), e.scalar(1.0, dt),
                 where(cmp("lt"), e.scalar(-1.0, dt), zero))
    return e.emit(f"rp.mul {x}, {sign} : ({ty}, {ty}) -> {ty}", ty)


def _topk_indices(node) -> bool:
    """Whether ``node`` is the indices of a topk (distinct in each row, so
    a scatter of a tensor writes each entry once)."""
    import operator
    src = node.args[0] if node.target is operator.getitem else None
    return node.args[1] == 1 and getattr(src, "target", None) is not None \
        and "topk" in str(src.target)


def _scatter_value(e, n):
    """x.scatter(-1, index, value): x with the entries the index names
    replaced by the constant, a where on whether any of the index's k
    entries of each row names the column (so x's gradient is zero there,
    as PyTorch's)."""
    import torch
    x, dim, index, value = n.args[:4]
    src = isinstance(value, torch.fx.Node)
    if n.kwargs.get("reduce") or not (src or isinstance(value, (int, float))):
        return _UNSUPPORTED
    if src and (list(e.values[value].shape) != list(e.values[index].shape)
                or not _topk_indices(index)):
        return _UNSUPPORTED
    xs, ishape = list(e.values[x].shape), list(e.values[index].shape)
    rank = len(xs)
    if _dim(dim, rank) != rank - 1 or len(ishape) != rank or \
            xs[:-1] != ishape[:-1]:
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
    # Any of the k: the hits counted (as f32) over the k axis.
    ft = _ttype(ishape + [c], torch.float32)
    hf = e.emit(f"rp.cast {hit} : {bt} to {ft}", ft)
    ct = _ttype(xs, torch.float32)
    count = e.emit(f"rp.reduce sum {hf} dims = [{rank - 1}] : {ft} -> {ct}",
                   ct)
    mt = _ttype(xs, torch.bool)
    zero = e.scalar(0.0, torch.float32)
    mask = e.emit(f"rp.cmp gt, {count}, {zero} : ({ct}, {e.ty(zero)}) -> "
                  f"{mt}", mt)
    ty = e.out_type(n)
    if src:
        # Each entry the index names takes its src value: the hits (each
        # row's k indices are distinct, as top-k's) weighting src, summed
        # over the k axis; src's gradient is x's gradient at its entry.
        sv = e.val(value, dt)
        st = _ttype(ishape + [1], dt)
        s1 = e.emit(f"rp.reshape {sv} : {e.ty(sv)} to {st}", st)
        ht = _ttype(ishape + [c], dt)
        hd = hf if dt == torch.float32 else \
            e.emit(f"rp.cast {hit} : {bt} to {ht}", ht)
        w = e.emit(f"rp.mul {hd}, {s1} : ({ht}, {st}) -> {ht}", ht)
        fill = e.emit(f"rp.reduce sum {w} dims = [{rank - 1}] : {ht} -> "
                      f"{ty}", ty)
    else:
        fill = e.scalar(value, dt)
    xv = e.val(x, dt)
    return e.emit(f"rp.where {mask}, {fill}, {xv} : ({mt}, {e.ty(fill)}, "
                  f"{ty}) -> {ty}", ty)


def _bool_operand(e, a):
    """``a`` as a bool ssa value: a bool tensor, or an integer one holding
    only 0 and 1 (a constant folded at trace time, or the integer result
    of an and / or of such: CPM-Ant's attention mask starts from an int
    tensor of ones), else None."""
    import torch
    if not isinstance(a, torch.fx.Node):
        return None
    v = e.values[a]
    if v.dtype == torch.bool:
        return e.val(a)
    if v.dtype.is_floating_point or v.dtype.is_complex:
        return None
    if a in e.const_nodes and not e.is_large(a) and \
            bool(((v == 0) | (v == 1)).all()):
        return e.constant(v.bool())
    if a.meta.get("rp_zero_one"):
        return e.val(a, torch.bool)
    return None


def _bool_operands(e, n):
    """The two operands of a bool op as bool values, or None where the result
    is floating or an operand is not 0/1."""
    out = e.values[n].dtype
    if out.is_floating_point or out.is_complex:
        return None
    ops = [_bool_operand(e, a) for a in n.args[:2]]
    return None if None in ops else ops


def _bool_result(e, n, r, bt):
    """The bool result r as n's type: itself, or cast back to the integers
    holding only 0 and 1 that the operands were."""
    import torch
    if e.values[n].dtype == torch.bool:
        return r
    n.meta["rp_zero_one"] = True
    ty = e.out_type(n)
    return e.emit(f"rp.cast {r} : {bt} to {ty}", ty)


def _bool_binary(is_and):
    """and / or of two bool tensors as a where: a and b is b where a, else
    false; a or b is true where a, else b. Integer operands holding only 0
    and 1 count as bool; the integer result is the bool one cast back."""
    def h(e, n):
        import torch
        ops = _bool_operands(e, n)
        if ops is None:
            return _UNSUPPORTED
        a, b = ops
        c = e.scalar(not is_and, torch.bool)
        then, other = (b, c) if is_and else (c, b)
        bt = _ttype(e.values[n].shape, torch.bool)
        r = e.emit(f"rp.where {a}, {then}, {other} : ({e.ty(a)}, "
                   f"{e.ty(then)}, {e.ty(other)}) -> {bt}", bt)
        return _bool_result(e, n, r, bt)
    return h


def _bool_xor(e, n):
    """a xor b of bools (torch.diff of a mask, BLT's patch boundaries):
    not b where a, else b, each a where; 0/1 integers as _bool_binary."""
    import torch
    ops = _bool_operands(e, n)
    if ops is None:
        return _UNSUPPORTED
    a, b = ops
    bt = _ttype(e.values[n].shape, torch.bool)
    yes, no = e.scalar(True, torch.bool), e.scalar(False, torch.bool)
    nb_t = _ttype(e.values[n.args[1]].shape, torch.bool)
    not_b = e.emit(f"rp.where {b}, {no}, {yes} : ({e.ty(b)}, {e.ty(no)}, "
                   f"{e.ty(yes)}) -> {nb_t}", nb_t)
    r = e.emit(f"rp.where {a}, {not_b}, {b} : ({e.ty(a)}, {e.ty(not_b)}, "
               f"{e.ty(b)}) -> {bt}", bt)
    return _bool_result(e, n, r, bt)


HANDLERS = {"constant_pad_nd": _constant_pad_nd, "abs": _abs,
            "scatter": _scatter_value,
            "bitwise_and": _bool_binary(True),
            "logical_and": _bool_binary(True),
            "bitwise_or": _bool_binary(False),
            "logical_or": _bool_binary(False),
            "bitwise_xor": _bool_xor, "logical_xor": _bool_xor}
