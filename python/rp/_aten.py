"""ATen op -> rp op text, one handler per ATen op (by overload packet
name). A handler gets the emitter and the fx node and returns the ssa name
of the result (or a tuple for multi-result ops, whose items may be thunks
emitted on first use), or _UNSUPPORTED when the op's arguments take a form
rp has no mapping for (the tracer's error then shows them).

This module holds the elementwise ops, the matmuls and the network ops
(attention, embedding, norms, softmax, reductions); the views, slices and
joins are in rp._aten_movement, the rest in the other rp._aten_* modules
(the table that merges them all: rp._emitter._HANDLERS)."""

from __future__ import annotations

import math

from rp._irtext import (_UNSUPPORTED, TraceError, _dim, _innermost, _opname,
                        _qualname, _ttype)


def _identity(e, n):
    return e.val(n.args[0])


def _detach(e, n):
    """x.detach(): the value, with the gradient stopped where one flows."""
    x = e.val(n.args[0])
    return e.stop_gradient(x) if n.args[0] in e.trained else x


def _binary(kind):
    def h(e, n):
        dt = e.values[n].dtype
        a, b = n.args[0], n.args[1]
        alpha = n.kwargs.get("alpha", n.args[2] if len(n.args) > 2 else 1)
        if kind == "rsub":
            a, b = b, a
        if n.kwargs.get("rounding_mode") is not None:
            return _UNSUPPORTED
        lhs = e.val(a, dt)
        rhs = e.val(b, dt)
        if alpha != 1 and kind in ("add", "sub", "rsub"):
            # torch: a + alpha * b (rsub: other - alpha * self)
            if kind == "rsub":
                lhs = e.emit(f"rp.mul {lhs}, {e.scalar(alpha, dt)} : "
                             f"({e.ty(lhs)}, {_ttype((), dt)}) -> {e.ty(lhs)}", e.ty(lhs))
            else:
                rhs = e.emit(f"rp.mul {rhs}, {e.scalar(alpha, dt)} : "
                             f"({e.ty(rhs)}, {_ttype((), dt)}) -> {e.ty(rhs)}", e.ty(rhs))
        op = {"rsub": "sub", "maximum": "max", "minimum": "min"}.get(kind, kind)
        ty = e.out_type(n)
        return e.emit(f"rp.{op} {lhs}, {rhs} : ({e.ty(lhs)}, {e.ty(rhs)}) -> {ty}", ty)
    return h


def _cmp(pred):
    def h(e, n):
        import torch
        a, b = n.args[0], n.args[1]
        va = e.values[a] if isinstance(a, torch.fx.Node) else a
        vb = e.values[b] if isinstance(b, torch.fx.Node) else b
        dt = torch.result_type(va, vb)
        lhs, rhs = e.val(a, dt), e.val(b, dt)
        ty = e.out_type(n)
        return e.emit(f"rp.cmp {pred}, {lhs}, {rhs} : ({e.ty(lhs)}, {e.ty(rhs)}) -> {ty}", ty)
    return h


def _not(e, n):
    import torch
    if e.values[n].dtype != torch.bool:
        return _UNSUPPORTED
    x = e.val(n.args[0])
    f = e.scalar(False, torch.bool)
    ty = e.out_type(n)
    return e.emit(f"rp.cmp eq, {x}, {f} : ({e.ty(x)}, {e.ty(f)}) -> {ty}", ty)


def _unary(op):
    def h(e, n):
        x = e.val(n.args[0], e.values[n].dtype)
        ty = e.out_type(n)
        return e.emit(f"rp.{op} {x} : {ty}", ty)
    return h


def _gelu(e, n):
    approx = n.kwargs.get("approximate", n.args[1] if len(n.args) > 1 else "none")
    x = e.val(n.args[0])
    ty = e.out_type(n)
    suffix = " approximate = tanh" if approx == "tanh" else ""
    return e.emit(f"rp.gelu {x}{suffix} : {ty}", ty)


def _pow(e, n):
    dt = e.values[n].dtype
    x = e.val(n.args[0], dt)
    p = e.val(n.args[1], dt)
    ty = e.out_type(n)
    return e.emit(f"rp.pow {x}, {p} : ({e.ty(x)}, {e.ty(p)}) -> {ty}", ty)


def _matmul_text(e, a, b, ty):
    return e.emit(f"rp.matmul {a}, {b} : ({e.ty(a)}, {e.ty(b)}) -> {ty}", ty)


_VIEWS = {"view", "_unsafe_view", "_reshape_alias", "reshape"}
# Not detach: it stops the gradient (_detach).
_SAME = {"clone", "alias", "contiguous"}


def _unflatten(e, node, keep: int):
    """ATen writes a matmul of [A..., M, K] tensors as a view to [prod(A),
    M, K] (through clone / same-shape expand) and a bmm or mm. Returns the
    tensor before that view when it has the same trailing ``keep`` dims and
    leading dims whose product is the flat one, else None."""
    import torch
    shape = list(e.values[node].shape)

    def fits(cand):
        s = list(e.values[cand].shape)
        return (len(s) > len(shape) and
                s[len(s) - keep:] == shape[len(shape) - keep:] and
                math.prod(s[:len(s) - keep]) ==
                math.prod(shape[:len(shape) - keep]))

    cur = node
    seen_view = False
    while isinstance(cur, torch.fx.Node) and cur.op == "call_function" and \
            cur not in e.const_nodes:
        name = _opname(cur)
        src = cur.args[0] if cur.args else None
        if not isinstance(src, torch.fx.Node):
            break
        if name in _SAME or (name == "expand" and
                             list(e.values[src].shape) == list(e.values[cur].shape)):
            cur = src
        elif name in _VIEWS:
            cur = src
            seen_view = True
        else:
            break
        if seen_view and fits(cur):
            return cur
    return None


def _matmul(e, a, b, out_node, bias=None):
    """rp.matmul of nodes ``a`` and ``b`` (plus ``bias``) with ``out_node``'s
    type, on the tensors before ATen's flattening views where possible."""
    ty = e.out_type(out_node)
    out_shape = list(e.values[out_node].shape)
    dt = e.values[out_node].dtype
    va, vb = e.values[a], e.values[b]
    lhs, rhs, full = a, b, None
    if va.dim() == 2 and vb.dim() == 2:
        src = _unflatten(e, a, 1)
        if src is not None:
            lhs = src
            full = list(e.values[src].shape)[:-1] + [out_shape[-1]]
    elif va.dim() == 3 and vb.dim() == 3:
        sa, sb = _unflatten(e, a, 2), _unflatten(e, b, 2)
        if sa is not None and sb is not None and \
                list(e.values[sa].shape)[:-2] == list(e.values[sb].shape)[:-2]:
            lhs, rhs = sa, sb
            full = list(e.values[sa].shape)[:-2] + out_shape[-2:]
    fty = ty if full is None else _ttype(full, dt)
    m = _matmul_text(e, e.val(lhs), e.val(rhs), fty)
    late = None
    if bias is not None:
        # The bias is added before the reshape back to the flat shape when
        # it broadcasts to the unflattened result (a [N] bias, a [1, M, N]
        # attention mask), else after it.
        if full is None or _broadcasts(list(e.values[bias].shape), full):
            bv = e.val(bias, dt)
            m = e.emit(f"rp.add {bv}, {m} : ({e.ty(bv)}, {fty}) -> {fty}", fty)
        else:
            late = bias
    if full is not None:
        m = e.emit(f"rp.reshape {m} : {fty} to {ty}", ty)
    if late is not None:
        bv = e.val(late, dt)
        m = e.emit(f"rp.add {bv}, {m} : ({e.ty(bv)}, {ty}) -> {ty}", ty)
    return m


def _broadcasts(shape, to) -> bool:
    """Whether numpy broadcasting of ``shape`` against ``to`` gives ``to``."""
    if len(shape) > len(to):
        return False
    return all(s in (1, t) for s, t in zip(shape[::-1], to[::-1]))


def _mm(e, n):
    if n.kwargs:
        return _UNSUPPORTED
    if e.values[n.args[0]].dim() < 2 or e.values[n.args[1]].dim() < 2:
        return _UNSUPPORTED
    return _matmul(e, n.args[0], n.args[1], n)


def _scaled_matmul(e, n):
    """beta * input + alpha * (a @ b), ATen's addmm and baddbmm. With
    beta = alpha = 1 (nn.Linear; MultiheadAttention's additive mask) the
    input is a plain bias; otherwise the product and the input are scaled
    by rp.mul, and beta = 0 drops the input (ATen ignores it then, NaN
    included)."""
    bias, a, b = n.args[:3]
    beta, alpha = n.kwargs.get("beta", 1), n.kwargs.get("alpha", 1)
    if beta == 1 and alpha == 1:
        return _matmul(e, a, b, n, bias=bias)
    dt = e.values[n].dtype
    m = _matmul(e, a, b, n)
    ty = e.ty(m)
    if alpha != 1:
        m = e.emit(f"rp.mul {m}, {e.scalar(alpha, dt)} : ({ty}, "
                   f"{_ttype((), dt)}) -> {ty}", ty)
    if beta == 0:
        return m
    bv = e.val(bias, dt)
    if beta != 1:
        bty = e.ty(bv)
        bv = e.emit(f"rp.mul {bv}, {e.scalar(beta, dt)} : ({bty}, "
                    f"{_ttype((), dt)}) -> {bty}", bty)
    return e.emit(f"rp.add {bv}, {m} : ({e.ty(bv)}, {ty}) -> {ty}", ty)


def _addmm(e, n):
    return _scaled_matmul(e, n)


def _baddbmm(e, n):
    a, b = n.args[1:3]
    if e.values[a].dim() != 3 or e.values[b].dim() != 3:
        return _UNSUPPORTED
    return _scaled_matmul(e, n)


def _sdpa(e, n):
    """torch 2's scaled_dot_product_attention as make_fx records it on the
    CPU (aten._scaled_dot_product_flash_attention_for_cpu, q/k/v
    [B, H, S, D]): rp.attention has its semantics (boolean mask keeps,
    float mask adds, causal, scale). Result 0 is the attention; result 1,
    the log-sum-exp, is an error if used."""
    q, k, v = n.args[:3]
    dropout = n.args[3] if len(n.args) > 3 else n.kwargs.get("dropout_p", 0.0)
    causal = n.args[4] if len(n.args) > 4 else n.kwargs.get("is_causal", False)
    mask, scale = n.kwargs.get("attn_mask"), n.kwargs.get("scale")
    if dropout:
        raise TraceError(
            f"rp.trace: unsupported op {_qualname(n)} (dropout_p = {dropout})"
            f" in {e.where(n)}; rp has no random ops (dropout is traced in "
            f"training mode and must have p = 0)", op=_qualname(n),
            module_path=_innermost(n))
    ops = [e.val(q), e.val(k), e.val(v)]
    text = f"rp.attention {ops[0]}, {ops[1]}, {ops[2]}"
    if mask is not None:
        ops.append(e.val(mask))
        text += f" mask({ops[3]})"
    if causal:
        # PyTorch aligns is_causal top-left; rp's causal is bottom-right
        # (the queries the last positions): the same only when S == T.
        sq, sk = e.values[q].shape[-2], e.values[k].shape[-2]
        if sq != sk:
            raise TraceError(
                f"rp.trace: unsupported op {_qualname(n)} (is_causal with "
                f"{sq} queries and {sk} keys) in {e.where(n)}; "
                f"PyTorch's causal mask is aligned top-left, rp's "
                f"bottom-right: pass the mask as attn_mask",
                op=_qualname(n), module_path=_innermost(n))
        text += " causal"
    if scale is not None:
        text += f" scale = {'%.17e' % float(scale)}"
    out = e.values[n][0]
    ty = _ttype(out.shape, out.dtype)
    return (e.emit(f"{text} : ({', '.join(e.ty(x) for x in ops)}) -> {ty}",
                   ty), None)


def _embedding(e, n):
    """aten.embedding: an rp.gather of the rows. With a padding_idx the
    padding row's gradient is zero, as in PyTorch: the positions holding the
    padding index read the row's value as a constant (taken at trace time;
    PyTorch never gives that row a gradient, so only weight decay could move
    it) and every other position gathers from the weight."""
    import torch
    w, idx = n.args[0], n.args[1]
    padding_idx = n.args[2] if len(n.args) > 2 else n.kwargs.get("padding_idx", -1)
    scale_by_freq = n.args[3] if len(n.args) > 3 else n.kwargs.get(
        "scale_grad_by_freq", False)
    sparse = n.args[4] if len(n.args) > 4 else n.kwargs.get("sparse", False)
    if scale_by_freq or sparse:
        return _UNSUPPORTED
    wv, iv = e.val(w), e.val(idx)
    ty = e.out_type(n)
    out = e.emit(f"rp.gather {wv}[{iv}] axis = 0 : ({e.ty(wv)}, {e.ty(iv)}) -> {ty}", ty)
    if padding_idx is None or padding_idx < 0:
        return out
    weight = e.values[w]
    if weight.dim() != 2 or padding_idx >= weight.shape[0]:
        return _UNSUPPORTED
    row = weight[padding_idx].detach()
    if not bool(row.any()):
        # The usual case (nn.Embedding zeroes the padding row): a splat,
        # exact whatever the optimizer does to the row.
        rv = e.scalar(0.0, weight.dtype)
    else:
        rv = e.constant(row.clone())
    pad = e.scalar(int(padding_idx), e.values[idx].dtype)
    ishape = tuple(e.values[idx].shape)
    cty = _ttype(ishape, torch.bool)
    keep = e.emit(f"rp.cmp ne, {iv}, {pad} : ({e.ty(iv)}, {e.ty(pad)}) -> {cty}", cty)
    kty = _ttype(ishape + (1,), torch.bool)
    keep = e.emit(f"rp.reshape {keep} : {cty} to {kty}", kty)
    return e.emit(f"rp.where {keep}, {out}, {rv} : ({kty}, {ty}, {e.ty(rv)}) -> {ty}", ty)


def _layer_norm(e, n):
    x, shape, w, b, eps = n.args[:5]
    rank = e.values[x].dim()
    axis = rank - len(shape)
    xv = e.val(x)
    ops, tys = [xv], [e.ty(xv)]
    text = f"rp.layer_norm {xv}"
    if w is not None:
        wv = e.val(w)
        text += f" scale({wv})"
        ops.append(wv)
        tys.append(e.ty(wv))
    if b is not None:
        bv = e.val(b)
        text += f" bias({bv})"
        ops.append(bv)
        tys.append(e.ty(bv))
    ty = e.types[xv]
    out = e.emit(f"{text} axis = {axis} epsilon = {'%.17e' % float(eps)} : "
                 f"({', '.join(tys)}) -> {ty}", ty)
    return (out, None, None)


def _softmax(op):
    def h(e, n):
        x, dim = n.args[0], n.args[1]
        if len(n.args) > 2 and n.args[2]:
            return _UNSUPPORTED  # half_to_float
        xv = e.val(x)
        d = _dim(dim, e.values[x].dim())
        ty = e.out_type(n)
        return e.emit(f"rp.{op} {xv} dim = {d} : {ty}", ty)
    return h


def _reduce(kind):
    def h(e, n):
        x = n.args[0]
        rank = e.values[x].dim()
        dims = n.args[1] if len(n.args) > 1 else list(range(rank))
        if isinstance(dims, int):
            dims = [dims]
        if dims is None or len(dims) == 0:
            dims = list(range(rank))
        keep = n.args[2] if len(n.args) > 2 else n.kwargs.get("keepdim", False)
        if n.kwargs.get("dtype") is not None:
            return _UNSUPPORTED
        dims = sorted({_dim(d, rank) for d in dims})
        xv = e.val(x)
        ty = e.out_type(n)
        kd = " keep_dims" if keep else ""
        return e.emit(f"rp.reduce {kind} {xv} dims = [{', '.join(map(str, dims))}]{kd} : "
                      f"{e.ty(xv)} -> {ty}", ty)
    return h


def _max(e, n):
    """torch.max: of two tensors (max.other), of all elements (max), or
    along a dim (max.dim: the values, and for floats the indices, the
    first position of the max, with no gradient)."""
    overload = n.target._overloadname
    if overload == "other":
        return _binary("maximum")(e, n)
    if overload == "default":
        return _reduce("max")(e, n)
    if overload != "dim":
        return _UNSUPPORTED
    x = n.args[0]
    rank = e.values[x].dim()
    dim = _dim(n.args[1], rank)
    keep = n.args[2] if len(n.args) > 2 else n.kwargs.get("keepdim", False)
    xv = e.val(x)
    ty = _ttype(e.values[n][0].shape, e.values[n][0].dtype)
    kd = " keep_dims" if keep else ""
    values = e.emit(f"rp.reduce max {xv} dims = [{dim}]{kd} : {e.ty(xv)} -> "
                    f"{ty}", ty)
    if not e.values[x].dtype.is_floating_point:
        return (values, None)
    return (values, lambda: _argmax_text(e, x, dim, keep))


def _argmax_text(e, x, dim, keep):
    """The first position of the max along ``dim`` (PhiMoE's sparsemixer
    picks its experts by torch.max's indices in eval mode), as rp-import
    writes ONNX's ArgMax: where x equals its max, the position (as a
    float, exact below 2^24), else past the end; the min of that, as
    int64. No gradient (an index)."""
    import torch
    shape = list(e.values[x].shape)
    xv = e.val(x)
    kept = list(shape)
    kept[dim] = 1
    dt = e.values[x].dtype
    mt = _ttype(kept, dt)
    best = e.emit(f"rp.reduce max {xv} dims = [{dim}] keep_dims : "
                  f"{e.ty(xv)} -> {mt}", mt)
    bt = _ttype(shape, torch.bool)
    at = e.emit(f"rp.cmp eq, {xv}, {best} : ({e.ty(xv)}, {mt}) -> {bt}", bt)
    place = [1] * len(shape)
    place[dim] = shape[dim]
    pos = e.constant(torch.arange(shape[dim], dtype=torch.float32)
                     .reshape(place))
    past = e.scalar(float(shape[dim]), torch.float32)
    ft = _ttype(shape, torch.float32)
    cand = e.emit(f"rp.where {at}, {pos}, {past} : ({bt}, {e.ty(pos)}, "
                  f"{e.ty(past)}) -> {ft}", ft)
    out = kept if keep else shape[:dim] + shape[dim + 1:]
    pt = _ttype(out, torch.float32)
    kd = " keep_dims" if keep else ""
    picked = e.emit(f"rp.reduce min {cand} dims = [{dim}]{kd} : {ft} -> "
                    f"{pt}", pt)
    it = _ttype(out, torch.int64)
    return e.emit(f"rp.cast {picked} : {pt} to {it}", it)


def _masked_fill(e, n):
    x, mask, value = n.args[:3]
    dt = e.values[n].dtype
    xv = e.val(x)
    mv = e.val(mask)
    fv = e.val(value, dt)
    ty = e.out_type(n)
    return e.emit(f"rp.where {mv}, {fv}, {xv} : ({e.ty(mv)}, {e.ty(fv)}, {e.ty(xv)}) -> {ty}", ty)


def _where(e, n):
    c, a, b = n.args[:3]
    dt = e.values[n].dtype
    cv, av, bv = e.val(c), e.val(a, dt), e.val(b, dt)
    ty = e.out_type(n)
    return e.emit(f"rp.where {cv}, {av}, {bv} : ({e.ty(cv)}, {e.ty(av)}, {e.ty(bv)}) -> {ty}", ty)


def _to_copy(e, n):
    x = n.args[0]
    dt = e.values[n].dtype
    xv = e.val(x)
    if e.values[x].dtype == dt:
        return xv
    ty = e.out_type(n)
    return e.emit(f"rp.cast {xv} : {e.ty(xv)} to {ty}", ty)


def _dropout(e, n):
    x, p, train = n.args[:3]
    if p == 0 or not train:
        return (e.val(x), None)
    raise TraceError(
        f"rp.trace: unsupported op {_qualname(n)} (p = {p}) in {e.where(n)}; "
        f"rp has no random ops (dropout is traced in training mode and must "
        f"have p = 0)", op=_qualname(n), module_path=_innermost(n))


HANDLERS = {
    "add": _binary("add"), "sub": _binary("sub"), "mul": _binary("mul"),
    "div": _binary("div"), "rsub": _binary("rsub"),
    "maximum": _binary("maximum"), "minimum": _binary("minimum"),
    "eq": _cmp("eq"), "ne": _cmp("ne"), "lt": _cmp("lt"), "le": _cmp("le"),
    "gt": _cmp("gt"), "ge": _cmp("ge"),
    "bitwise_not": _not, "logical_not": _not,
    "neg": _unary("neg"), "exp": _unary("exp"), "log": _unary("log"),
    "sqrt": _unary("sqrt"), "rsqrt": _unary("rsqrt"), "tanh": _unary("tanh"),
    "erf": _unary("erf"), "sigmoid": _unary("sigmoid"), "silu": _unary("silu"),
    "relu": _unary("relu"), "gelu": _gelu, "pow": _pow,
    "clone": _identity, "alias": _identity, "detach": _detach,
    "contiguous": _identity, "lift_fresh_copy": _identity,
    "_to_copy": _to_copy,
    "mm": _mm, "bmm": _mm, "matmul": _mm, "addmm": _addmm,
    "baddbmm": _baddbmm,
    "_scaled_dot_product_flash_attention_for_cpu": _sdpa,
    "embedding": _embedding, "native_layer_norm": _layer_norm,
    "_softmax": _softmax("softmax"), "_log_softmax": _softmax("log_softmax"),
    "mean": _reduce("mean"), "sum": _reduce("sum"), "amax": _reduce("max"),
    "max": _max,
    "amin": _reduce("min"),
    "masked_fill": _masked_fill, "where": _where,
    "native_dropout": _dropout,
}

