"""GPT-OSS-style mixture-of-experts blocks in rp.trace (rp._moe finds the
others).

The form, found by structure: a router child holding a ``[E, H]`` weight
and an ``[E]`` bias, and an experts child holding exactly four parameters,
``[E, H, 2F]`` and ``[E, F, H]`` stacks (the ``x @ W`` layout, not
nn.Linear's) and their ``[E, 2F]`` and ``[E, H]`` biases, with float
``alpha`` and ``limit`` attributes. Its math, which the block must
reproduce on random tokens before it is traced (the probe also tries the
gate and up columns interleaved or as halves):

    logits = x W_r^T + b_r;  top-k of the logits, softmax over those k
    gu     = x W_gu[e] + b_gu[e];  gate, up = its even and odd columns
    gate   = min(gate, limit);  up = clamp(up, -limit, limit)
    y_e    = ((up + 1) * gate * sigmoid(alpha * gate)) W_d[e] + b_d[e]

It traces as ``rp_trace::moe_oss``, written as rp.moe.route (``softmax =
after``), rp.moe.dispatch, rp.moe.grouped_matmul by each stack, the bias of
each row's expert as a grouped matmul of a column of ones by the biases
(``[E, 1, n]``, so its gradient is the bias's), the clamps and the gate as
elementwise ops, and rp.moe.combine.
"""

from __future__ import annotations

from rp import _moe_common
from rp._irtext import TraceError, _ttype


def candidate(path, block):
    """(router, experts, top_k, names) when `block` has the form."""
    for router in block.children():
        rp_ = dict(router.named_parameters(recurse=False))
        w, b = rp_.get("weight"), rp_.get("bias")
        if len(rp_) != 2 or w is None or b is None or w.dim() != 2 or \
                b.shape != w.shape[:1] or w.shape[0] < 2:
            continue
        e, hidden = w.shape
        for experts in block.children():
            if experts is router:
                continue
            own = dict(experts.named_parameters(recurse=False))
            if len(own) != 4 or any(p.shape[0] != e for p in own.values()):
                continue
            stacks = {n: p for n, p in own.items() if p.dim() == 3}
            biases = {n: p for n, p in own.items() if p.dim() == 2}
            up = [n for n, p in stacks.items() if p.shape[1] == hidden]
            down = [n for n, p in stacks.items() if p.shape[2] == hidden and
                    n not in up]
            if len(up) != 1 or len(down) != 1:
                continue
            ffn2 = stacks[up[0]].shape[2]
            if stacks[down[0]].shape[1] * 2 != ffn2:
                continue
            up_b = [n for n, p in biases.items() if p.shape[1] == ffn2]
            down_b = [n for n, p in biases.items() if p.shape[1] == hidden
                      and n not in up_b]
            if len(up_b) != 1 or len(down_b) != 1:
                continue
            alpha = getattr(experts, "alpha", None)
            limit = getattr(experts, "limit", None)
            if not isinstance(alpha, float) or not isinstance(limit, float):
                raise TraceError(
                    f"rp.trace: module '{path}' ({type(block).__name__}) has "
                    f"a biased router and {e} biased experts but its experts "
                    f"module has no float `alpha` and `limit` (the clamped "
                    f"SwiGLU's constants)", module_path=path)
            names = (up[0], up_b[0], down[0], down_b[0], alpha, limit)
            top_k = _moe_common.top_k_of(path, block, router, e)
            return router, experts, top_k, names
    return None


def _gate(gu, interleaved, alpha, limit):
    import torch
    f = gu.shape[-1] // 2
    gate, up = (gu[..., ::2], gu[..., 1::2]) if interleaved else \
        (gu[..., :f], gu[..., f:])
    gate = gate.clamp(max=limit)
    up = up.clamp(min=-limit, max=limit)
    return (up + 1) * gate * torch.sigmoid(gate * alpha)


def reference(x, logits, w_gu, b_gu, w_d, b_d, top_k, interleaved, alpha,
              limit):
    """The form's math on real tensors."""
    import torch
    top, experts = torch.topk(logits, top_k, dim=-1)
    weights = torch.softmax(top.float(), dim=-1).to(x.dtype)
    out = torch.zeros_like(x)
    for e in range(w_gu.shape[0]):
        tok, slot = torch.where(experts == e)
        if tok.numel() == 0:
            continue
        h = _gate(x[tok] @ w_gu[e] + b_gu[e], interleaved, alpha, limit)
        y = (h @ w_d[e] + b_d[e]) * weights[tok, slot, None]
        out.index_add_(0, tok, y)
    return out


def probe(path, block, router, experts, top_k, names):
    """(interleaved, tuple output) reproducing the block."""
    import torch
    up, up_b, down, down_b, alpha, limit = names
    hidden = router.weight.shape[1]
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, hidden, generator=g, dtype=router.weight.dtype)
    with torch.no_grad():
        out = block(x)
        ref = out[0] if isinstance(out, tuple) else out
        flat = x.reshape(-1, hidden)
        logits = torch.nn.functional.linear(flat, router.weight, router.bias)
        for interleaved in (True, False):
            got = reference(flat, logits, getattr(experts, up),
                            getattr(experts, up_b), getattr(experts, down),
                            getattr(experts, down_b), top_k, interleaved,
                            alpha, limit)
            if got.shape == ref.reshape(-1, hidden).shape and torch.allclose(
                    got.reshape(ref.shape), ref, rtol=1e-4, atol=1e-5):
                return interleaved, isinstance(out, tuple)
    raise TraceError(
        f"rp.trace: module '{path}' ({type(block).__name__}) has a biased "
        f"router and {getattr(experts, up).shape[0]} biased experts, but its "
        f"output is not the top-{top_k}-then-softmax weighted sum of clamped "
        f"SwiGLU experts (GPT-OSS's) rp maps to its MoE ops",
        module_path=path)


def define(lib):
    """Declares rp_trace::moe_oss in `lib` (rp._moe._library)."""
    import torch
    lib.define("moe_oss(Tensor x, Tensor logits, Tensor w_gu, Tensor b_gu, "
               "Tensor w_d, Tensor b_d, int top_k, bool interleaved, "
               "float alpha, float limit) -> Tensor")

    def impl(*args):
        with torch.no_grad():
            return reference(*args)

    lib.impl("moe_oss", impl, "CPU")


def forward_for(router, experts, top_k, names, interleaved, as_tuple):
    """The block's traceable forward."""
    up, up_b, down, down_b, alpha, limit = names

    def forward(hidden_states, *_):
        import torch
        shape = hidden_states.shape
        x = hidden_states.reshape(-1, shape[-1])
        logits = torch.nn.functional.linear(x, router.weight, router.bias)
        _moe_common.run_router_hooks(router, x, logits)
        y = torch.ops.rp_trace.moe_oss(
            x, logits, getattr(experts, up), getattr(experts, up_b),
            getattr(experts, down), getattr(experts, down_b), top_k,
            interleaved, alpha, limit).reshape(shape)
        return (y, logits) if as_tuple else y

    return forward


def handler(e, n):
    """rp_trace::moe_oss as the rp.moe ops and elementwise ones."""
    import torch
    x, logits, w_gu, b_gu, w_d, b_d, top_k, interleaved, alpha, limit = \
        n.args
    n_exp, _, ffn2 = e.values[w_gu].shape
    ffn = ffn2 // 2
    m = _moe_common.route_dispatch(e, x, logits, n_exp, top_k, "after")
    dt, rows, hidden, r, c, ct = m.dt, m.rows, m.hidden, m.r, m.c, m.ct
    ones = e.constant(torch.ones(rows, 1, dtype=dt))

    def biased(inp, stack, bias, width):
        out_t = _ttype((rows, width), dt)
        y = e.emit(f"rp.moe.grouped_matmul {inp}, {e.val(stack)}, {c} : "
                   f"({e.ty(inp)}, {e.ty(e.val(stack))}, {ct}) -> {out_t}",
                   out_t)
        bt = _ttype((n_exp, 1, width), dt)
        b3 = e.emit(f"rp.reshape {e.val(bias)} : {e.ty(e.val(bias))} to "
                    f"{bt}", bt)
        rb = e.emit(f"rp.moe.grouped_matmul {ones}, {b3}, {c} : "
                    f"({e.ty(ones)}, {bt}, {ct}) -> {out_t}", out_t)
        return e.emit(f"rp.add {y}, {rb} : ({out_t}, {out_t}) -> {out_t}",
                      out_t)

    gu = biased(r, w_gu, b_gu, ffn2)
    gut, ht = _ttype((rows, ffn2), dt), _ttype((rows, ffn), dt)
    step, up_at = (2, 1) if interleaved else (1, ffn)
    gate = e.emit(f"rp.slice {gu} offsets = [0, 0] strides = [1, {step}] : "
                  f"{gut} -> {ht}", ht)
    up = e.emit(f"rp.slice {gu} offsets = [0, {up_at}] strides = [1, {step}]"
                f" : {gut} -> {ht}", ht)
    st = _ttype((), dt)

    def binary(op, a, b, bt=st):
        return e.emit(f"rp.{op} {a}, {b} : ({ht}, {bt}) -> {ht}", ht)

    gate = binary("min", gate, e.scalar(limit, dt))
    up = binary("max", binary("min", up, e.scalar(limit, dt)),
                e.scalar(-limit, dt))
    sg = e.emit(f"rp.sigmoid {binary('mul', gate, e.scalar(alpha, dt))} : "
                f"{ht}", ht)
    glu = binary("mul", gate, sg, ht)
    h = binary("mul", binary("add", up, e.scalar(1.0, dt)), glu, ht)
    y = biased(h, w_d, b_d, hidden)
    return _moe_common.combine(e, m, y)
