"""What the two MoE trace front ends share (rp._moe for the ModuleList and
stacked forms, rp._moe_oss for GPT-OSS's, rp._moe_grouped's handler too):
finding a block's top-k, running a router's hooks, and the rp.moe.route /
rp.moe.dispatch opening and rp.moe.combine closing of a block's IR. One
home, imported by each of them, so that none imports another's private
helpers (the import cycle _moe -> _moe_oss -> _moe)."""

from __future__ import annotations

from rp._irtext import TraceError, _ttype


def top_k_of(path, block, router, e):
    for m in (block, router):
        for attr in ("top_k", "num_experts_per_tok"):
            if isinstance(getattr(m, attr, None), int):
                return getattr(m, attr)
    raise TraceError(
        f"rp.trace: module '{path}' ({type(block).__name__}) has a "
        f"router and {e} experts but no integer top_k or "
        f"num_experts_per_tok attribute saying how many experts "
        f"each token uses", module_path=path)


def probe_inputs(n_ids, h, dtype):
    """Ten tokens of width h, each routed to min(2, n_ids) distinct ids
    with random weights, from a fixed seed: the call both experts-module
    recognisers (rp._moe_stacked, rp._moe_grouped) make on a candidate to
    compare its output with rp's own forward. Returns (x, ids, w)."""
    import torch
    g = torch.Generator().manual_seed(0)
    x = torch.randn(10, h, generator=g, dtype=dtype)
    k = min(2, n_ids)
    ids = torch.stack([torch.randperm(n_ids, generator=g)[:k]
                       for _ in range(10)])
    w = torch.rand(10, k, generator=g, dtype=dtype)
    return x, ids, w


def run_router_hooks(router, x, logits):
    """Runs the hooks of a router module the traced forward does not call,
    as if it had been called and returned (logits, ...): transformers 5
    records the router logits its load-balancing loss reads
    (output_router_logits) with a forward hook taking the first output."""
    for key, hook in list(router._forward_pre_hooks.items()):
        if key in router._forward_pre_hooks_with_kwargs:
            hook(router, (x,), {})
        else:
            hook(router, (x,))
    for key, hook in list(router._forward_hooks.items()):
        if key in router._forward_hooks_with_kwargs:
            hook(router, (x,), {}, (logits,))
        else:
            hook(router, (x,), (logits,))


class Routed:
    """What rp.moe.route and rp.moe.dispatch gave a block: the weights w
    (wt), the positions p (pt), the dispatched rows r (rt) and the
    per-expert counts c (ct), with the block's tokens, hidden width, dtype
    and dispatched row count."""


def route_dispatch(e, x, logits, n_exp, top_k, softmax):
    """Emits rp.moe.route (`softmax`: "before", "before normalize" or
    "after") and rp.moe.dispatch of the tokens x; both trace front ends'
    blocks start so (rp._moe._moe_block, rp._moe_oss.handler)."""
    import torch
    m = Routed()
    m.tokens, m.hidden = e.values[x].shape
    m.dt = dt = e.values[x].dtype
    m.rows = m.tokens * top_k
    xs, ls = e.val(x), e.val(logits, dt)
    m.wt = _ttype((m.tokens, top_k), dt)
    ext = _ttype((m.tokens, top_k), torch.int64)
    m.w, ex = e.fresh(), e.fresh()
    e.region.lines.append(
        f"{m.w}, {ex} = rp.moe.route {ls} top_k = {top_k} softmax = "
        f"{softmax} : {e.ty(ls)} -> ({m.wt}, {ext})")
    e.types[m.w], e.types[ex] = m.wt, ext
    m.rt = _ttype((m.rows, m.hidden), dt)
    m.pt = _ttype((m.tokens, top_k), torch.int32)
    m.ct = _ttype((n_exp,), torch.int32)
    m.r, m.p, m.c = e.fresh(), e.fresh(), e.fresh()
    e.region.lines.append(
        f"{m.r}, {m.p}, {m.c} = rp.moe.dispatch {xs}, {ex} : ({e.ty(xs)}, "
        f"{ext}) -> ({m.rt}, {m.pt}, {m.ct})")
    e.types[m.r], e.types[m.p], e.types[m.c] = m.rt, m.pt, m.ct
    return m


def combine(e, m, y):
    """rp.moe.combine of the experts' rows y back into token order."""
    ot = _ttype((m.tokens, m.hidden), m.dt)
    return e.emit(f"rp.moe.combine {y}, {m.p} weights({m.w}) : ({m.rt}, "
                  f"{m.pt}, {m.wt}) -> {ot}", ot)
