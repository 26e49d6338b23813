"""DeepSeek-V3's mixture-of-experts routing in rp.trace.

transformers 5 splits such a block into a router module returning
``(logits, weights, experts)`` and an experts module called as
``experts(x, experts, weights)`` (stacked ``[E, 2F, H]`` gate-and-up and
``[E, H, F]`` down parameters), beside shared experts the block adds. The
router (DeepSeek-V3's, and the families that copy it: GLM-4-MoE, dots1,
...) scores experts with a sigmoid, picks them by the scores plus a
correction bias (a buffer) within the ``topk_group`` best of ``n_group``
groups (a group's score is the sum of its two best), and weights the
chosen experts by their sigmoid scores, renormalised (``norm_topk_prob``)
and scaled (``routed_scaling_factor``).

While tracing, the router's forward becomes the sigmoid, one
``rp_trace::moe_group_topk`` op (the chosen experts: integers, no
gradient; the handler writes the group-limited top-k as rp.moe.route on
the group scores and then on the masked scores) and the weights computed
from the scores with a one-hot mask, so their gradient reaches the router
as in PyTorch. The experts' forward becomes one ``rp_trace::moe_experts``
op: rp.moe.dispatch, the grouped matmuls and the weighted rp.moe.combine.
Both forms are checked against the modules' own outputs on random tokens
first; a router they do not reproduce is an rp.TraceError.
"""

from __future__ import annotations

import math

from rp import _moe_common
from rp._irtext import TraceError, _ttype

_DEFINED = False


def _group_topk(scores, bias, top_k, n_group, topk_group):
    """The chosen experts, largest first (torch's own ops)."""
    import torch
    sel = scores + bias
    t, e = sel.shape
    if n_group > 1:
        gs = sel.view(t, n_group, e // n_group).topk(2, dim=-1)[0].sum(-1)
        gidx = torch.topk(gs, k=topk_group, dim=-1)[1]
        gmask = torch.zeros_like(gs).scatter_(1, gidx, 1)
        mask = gmask.unsqueeze(-1).expand(t, n_group, e // n_group) \
            .reshape(t, e)
        sel = sel.masked_fill(~mask.bool(), float("-inf"))
    return torch.topk(sel, k=top_k, dim=-1)[1]


def _act_ref(act, g):
    """The activation ``act`` names (see _act_of) on ``g``."""
    import torch.nn.functional as F
    if act == "relu2":
        return F.relu(g) ** 2
    return {"silu": F.silu, "gelu": F.gelu, "relu": F.relu}[act](g)


def _split_act(act):
    """(activation, gated, limit): ``act`` is "silu", "plain relu2" (one
    up projection, no gate: Nemotron-H's experts), "silu limit 10.0" (the
    gate clamped above and the up projection to +-limit: HY-V4's) or
    "softcap 4.0 25.0" (Inkling 2's: G tanh(g / G) sigmoid(g) U tanh(u /
    U); limit is the pair (G, U)) or "oss 1.702 7.0" (GPT-OSS's gate: g
    clamped above and u to +-L, (u + 1) g sigmoid(alpha g); limit is the
    pair (alpha, L))."""
    parts = act.split()
    if parts[0] in ("softcap", "oss"):
        return parts[0], True, (float(parts[1]), float(parts[2]))
    gated = parts[0] != "plain"
    if not gated:
        parts = parts[1:]
    limit = float(parts[2]) if len(parts) > 2 else None
    return parts[0], gated, limit


def _experts_ref(x, experts, weights, gate_up, down, act, gate_first):
    import torch
    import torch.nn.functional as F
    fn, gated, limit = _split_act(act)
    f = down.shape[2]
    out = torch.zeros_like(x)
    for k in range(experts.shape[1]):
        for e in range(gate_up.shape[0]):
            rows = experts[:, k] == e
            if not bool(rows.any()):
                continue
            both = F.linear(x[rows], gate_up[e])
            if gated:
                g, u = (both[:, :f], both[:, f:]) if gate_first else \
                    (both[:, f:], both[:, :f])
                if fn == "oss":
                    (al, lim) = limit
                    g, u = g.clamp(max=lim), u.clamp(-lim, lim)
                    a = (u + 1) * g * torch.sigmoid(g * al)
                elif fn == "softcap":
                    (cg, cu) = limit
                    a = torch.tanh(g / cg) * cg * torch.sigmoid(g) * \
                        torch.tanh(u / cu) * cu
                else:
                    if limit is not None:
                        g, u = g.clamp(max=limit), u.clamp(-limit, limit)
                    a = _act_ref(fn, g) * u
            else:
                a = _act_ref(fn, both)
            out[rows] += F.linear(a, down[e]) * weights[rows, k, None]
    return out


def define(lib):
    """Defines the two ops on the rp_trace library."""
    import torch
    lib.define("moe_group_topk(Tensor scores, Tensor bias, int top_k, "
               "int n_group, int topk_group) -> Tensor")

    def topk_impl(scores, bias, top_k, n_group, topk_group):
        with torch.no_grad():
            return _group_topk(scores, bias, top_k, n_group, topk_group)

    lib.impl("moe_group_topk", topk_impl, "CPU")
    lib.define("moe_experts(Tensor x, Tensor experts, Tensor weights, "
               "Tensor gate_up, Tensor down, str act, bool gate_first) "
               "-> Tensor")

    def experts_impl(x, experts, weights, gate_up, down, act, gate_first):
        with torch.no_grad():
            return _experts_ref(x, experts, weights, gate_up, down, act,
                                gate_first)

    lib.impl("moe_experts", experts_impl, "CPU")


def _router_form(router):
    """(top_k, n_group, topk_group, normalize, scale) of a DeepSeek-V3-like
    router, or None."""
    import torch
    w = getattr(router, "weight", None)
    bias = getattr(router, "e_score_correction_bias", None)
    if not isinstance(w, torch.nn.Parameter) or w.dim() != 2 or \
            not isinstance(bias, torch.Tensor) or bias.shape != w.shape[:1]:
        return None
    top_k = getattr(router, "top_k", None)
    groups = getattr(router, "n_group", getattr(router, "num_group", None))
    topk_group = getattr(router, "topk_group", None)
    score_fn = getattr(router, "score_fn", None)
    if groups is None and topk_group is None and score_fn is not None:
        # No groups (Inkling 2's router): one group, when it scores with
        # a sigmoid.
        x = torch.linspace(-3, 3, 13)
        try:
            sigmoid = bool((score_fn(x) - x.sigmoid()).abs().max() < 1e-6)
        except Exception:  # noqa: BLE001 - a score of another signature
            sigmoid = False
        if sigmoid:
            groups, topk_group = 1, 1
    if not all(isinstance(v, int) for v in (top_k, groups, topk_group)):
        return None
    # No norm_topk_prob: probe() tries both.
    normalize = getattr(router, "norm_topk_prob", None)
    return (top_k, groups, topk_group,
            None if normalize is None else bool(normalize),
            float(getattr(router, "routed_scaling_factor", 1.0) or 1.0))


def _router_forward(router, form):
    import torch
    top_k, groups, topk_group, normalize, scale = form

    def forward(hidden_states, *_):
        x = hidden_states.reshape(-1, router.weight.shape[1])
        logits = torch.nn.functional.linear(x.float(), router.weight.float())
        scores = logits.sigmoid()
        experts = torch.ops.rp_trace.moe_group_topk(
            scores, router.e_score_correction_bias.float(), top_k, groups,
            topk_group)
        ids = torch.arange(scores.shape[1])
        onehot = (experts.unsqueeze(-1) == ids).to(scores.dtype)
        weights = (onehot * scores.unsqueeze(1)).sum(-1)
        if normalize:
            weights = weights / (weights.sum(-1, keepdim=True) + 1e-20)
        return logits, weights * scale, experts
    return forward


def _experts_forward(experts, act, gate_first, transposed=False):
    """``transposed``: the stacks are ``[E, H, 2F]`` / ``[E, F, H]``
    (transformers' ``is_transposed`` experts, Aria's): traced as a
    transpose of each parameter, so the gradients keep their names."""
    import torch

    def forward(hidden_states, top_k_index, top_k_weights, *_):
        up, down = _up_of(experts), experts.down_proj
        if transposed:
            up, down = up.transpose(1, 2), down.transpose(1, 2)
        return torch.ops.rp_trace.moe_experts(
            hidden_states, top_k_index,
            top_k_weights.to(hidden_states.dtype), up, down, act, gate_first)
    return forward


def _up_of(experts):
    """The stacked first projection: gate-and-up ``[E, 2F, H]``, or up
    ``[E, F, H]`` for experts with no gate."""
    gu = getattr(experts, "gate_up_proj", None)
    return gu if gu is not None else getattr(experts, "up_proj", None)


def _act_of(experts):
    """The experts' activation as _split_act reads it, or None: the
    act_fn (SiLU, GELU, ReLU, squared ReLU), "plain" for experts with an
    up projection and no gate, the clamp of a ``swiglu_limit`` with no
    act_fn (HY-V4's clamped SwiGLU)."""
    import torch
    import torch.nn.functional as F
    fn = getattr(experts, "act_fn", None)
    x = torch.linspace(-3, 3, 13)
    caps = [getattr(getattr(fn, k, None), "softcap", None)
            for k in ("gate_softcap", "up_softcap")]
    if all(isinstance(c, (int, float)) for c in caps):
        # Inkling 2's soft-capped SwiGLU, checked on the probe's tokens.
        return f"softcap {float(caps[0])!r} {float(caps[1])!r}"
    plain = getattr(experts, "gate_up_proj", None) is None
    limit = getattr(experts, "swiglu_limit", None)
    if fn is None:
        if plain or not isinstance(limit, (int, float)):
            return None
        alpha = getattr(experts, "swiglu_alpha", None)
        if isinstance(alpha, (int, float)):
            # GPT-OSS's gate, halves not interleaved (MiniMax-M3's).
            return f"oss {float(alpha)!r} {float(limit)!r}"
        return f"silu limit {float(limit)!r}"
    try:
        y = fn(x)
    except Exception:  # noqa: BLE001 - an activation of another signature
        return None
    refs = [("silu", F.silu), ("gelu", F.gelu)]
    if plain:
        refs += [("relu", F.relu), ("relu2", lambda t: F.relu(t) ** 2)]
    for name, ref in refs:
        if bool((y - ref(x)).abs().max() < 1e-6):
            return f"plain {name}" if plain else name
    return None


def candidate(path, block):
    """(router, experts, form, act) when `block` holds a DeepSeek-V3-like
    router child and a stacked experts child; None otherwise. A router of
    that form beside experts rp cannot map is a TraceError."""
    router = next((m for m in block.children()
                   if _router_form(m) is not None), None)
    if router is None:
        return None
    ex = next((m for m in block.children()
               if isinstance(_up_of(m), __import__("torch").Tensor) and
               hasattr(m, "down_proj")), None)
    act = _act_of(ex) if ex is not None else None
    if ex is None or act is None or _up_of(ex).dim() != 3:
        raise TraceError(
            f"rp.trace: module '{path}' ({type(block).__name__}) routes with "
            f"sigmoid scores, a correction bias and group-limited top-k, but "
            f"its experts are not stacked [E, 2F, H] / [E, H, F] gated MLPs "
            f"with a SiLU or GELU activation (clamped or not), nor [E, F, H]"
            f" / [E, H, F] MLPs with a SiLU, GELU, ReLU or squared ReLU, the "
            f"forms rp maps", op="moe routing", module_path=path)
    return router, ex, _router_form(router), act


def probe(path, router, experts, form, act):
    """(gate_first, form), after checking the replicas against the
    modules (the form's normalize decided where the router has no
    norm_topk_prob)."""
    import torch
    h = router.weight.shape[1]
    g = torch.Generator().manual_seed(0)
    x = torch.randn(10, h, generator=g, dtype=router.weight.dtype)
    tries = [(gf, nm) for nm in ((form[3],) if form[3] is not None
                                 else (True, False))
             for gf in (True, False)]
    with torch.no_grad():
        _, w_ref, i_ref = router(x)
        order = torch.argsort(i_ref, dim=-1)
        for gate_first, normalize in tries:
            form = form[:3] + (normalize,) + form[4:]
            ids = _group_topk(
                torch.sigmoid(torch.nn.functional.linear(
                    x.float(), router.weight.float())),
                router.e_score_correction_bias.float(), *form[:3])
            _, w, _ = _router_forward(router, form)(x)
            mine = torch.argsort(ids, dim=-1)
            same_route = torch.equal(ids.gather(1, mine),
                                     i_ref.gather(1, order)) and \
                torch.allclose(w.gather(1, mine), w_ref.gather(1, order),
                               rtol=1e-5, atol=1e-6)
            if not same_route:
                continue
            y_ref = experts(x, i_ref, w_ref)
            y = _experts_ref(x, ids, w.to(x.dtype), _up_of(experts),
                             experts.down_proj, act, gate_first)
            if torch.allclose(y, y_ref, rtol=1e-4, atol=1e-5):
                return gate_first, form
    raise TraceError(
        f"rp.trace: module '{path}' has a router with a correction bias and "
        f"group-limited top-k (DeepSeek-V3's form), but rp's replica of it "
        f"(sigmoid scores, top-2 group sums, renormalised and scaled "
        f"weights, gated-MLP experts) does not reproduce its output; rp "
        f"cannot map this routing yet", op="moe routing", module_path=path)


def patch(path, block, saved):
    """Replaces the router's and experts' forwards; records them in saved.
    Returns False when `block` is not of this form."""
    found = candidate(path, block)
    if found is None:
        return False
    router, experts, form, act = found
    gate_first, form = probe(path, router, experts, form, act)
    for m, fwd in ((router, _router_forward(router, form)),
                   (experts, _experts_forward(experts, act, gate_first))):
        saved.append((m, m.__dict__.get("forward")))
        m.forward = fwd
    return True


def patch_experts(path, experts, saved):
    """Replaces the forward of a transformers 5 experts module alone
    (stacked ``[E, 2F, H]`` / ``[E, H, F]`` gated MLPs called as
    ``experts(x, top_k_index, top_k_weights)``) by the moe_experts op, when
    its block's router is of no form rp maps as a whole: the router is then
    traced op by op (its top-k, gathers and softmax), the experts by the
    rp.moe ops. Returns False when `experts` is not such a module or rp's
    replica does not reproduce it on random routing."""
    import torch
    gu = getattr(experts, "gate_up_proj", None)
    down = getattr(experts, "down_proj", None)
    if not isinstance(gu, torch.nn.Parameter) or \
            not isinstance(down, torch.nn.Parameter) or gu.dim() != 3 or \
            down.dim() != 3 or getattr(gu, "bias", None) is not None:
        return False
    # transformers' is_transposed experts (Aria's) store [E, H, 2F] and
    # [E, F, H]: the same computation on the transposed stacks.
    transposed = bool(getattr(experts, "is_transposed", False))
    if transposed:
        gu, down = gu.transpose(1, 2), down.transpose(1, 2)
    if gu.shape[0] != down.shape[0] or gu.shape[1] != 2 * down.shape[2] or \
            gu.shape[2] != down.shape[1]:
        return False
    act = _act_of(experts)
    if act is None:
        return False
    n_exp, h = gu.shape[0], gu.shape[2]
    x, ids, w = _moe_common.probe_inputs(n_exp, h, gu.dtype)
    acts = [act]
    lim = getattr(experts, "limit", None)
    if act in ("silu", "gelu") and isinstance(lim, (int, float)) and \
            math.isfinite(lim):
        # A clamp bound named `limit` (DeepSeek-V4's SwiGLU clamps the gate
        # above and the up projection to +-limit before the activation):
        # tried first, and every form is checked where it binds too.
        acts = [f"{act} limit {float(lim)!r}", act]
    try:
        with torch.no_grad():
            pre = torch.einsum("th,efh->tef", x, gu).abs().max()
            scales = [1.0]
            if isinstance(lim, (int, float)) and math.isfinite(lim):
                scales.append(3 * lim / max(float(pre), 1e-6))
            refs = [experts(x * sc, ids, w) for sc in scales]
            for form in acts:
                for gate_first in (True, False):
                    if all(torch.allclose(
                            _experts_ref(x * sc, ids, w, gu, down, form,
                                         gate_first), y_ref,
                            rtol=1e-4, atol=1e-5 * sc)
                           for sc, y_ref in zip(scales, refs)):
                        saved.append((experts,
                                      experts.__dict__.get("forward")))
                        experts.forward = _experts_forward(
                            experts, form, gate_first, transposed)
                        return True
    except Exception:  # noqa: BLE001 - not called this way: not this form
        return False
    return False


# -- handlers -----------------------------------------------------------------

def _onehot(e, ids, n):
    """[.., k, n] f32 one-hot of the int64 ids [.., k]."""
    import torch
    ty = e.ty(ids)
    dims = [int(d) for d in ty[len("tensor<"):].split("x")[:-1]]
    col_t = _ttype(tuple(dims) + (1,), torch.int64)
    col = e.emit(f"rp.reshape {ids} : {ty} to {col_t}", col_t)
    rng = e.constant(torch.arange(n).reshape((1,) * len(dims) + (n,)))
    bt = _ttype(tuple(dims) + (n,), torch.bool)
    hit = e.emit(f"rp.cmp eq, {col}, {rng} : ({col_t}, {e.ty(rng)}) -> {bt}",
                 bt)
    ft = _ttype(tuple(dims) + (n,), torch.float32)
    return e.emit(f"rp.cast {hit} : {bt} to {ft}", ft), dims


def _route(e, x, k):
    """The top-k ids of each row of the f32 [R, C] x (rp.moe.route: the
    top-k of softmax(x), the top-k of x, in PyTorch's order)."""
    import torch
    rows = int(e.ty(x)[len("tensor<"):].split("x")[0])
    wt = _ttype((rows, k), torch.float32)
    it = _ttype((rows, k), torch.int64)
    w, ids = e.fresh(), e.fresh()
    e.region.lines.append(f"{w}, {ids} = rp.moe.route {x} top_k = {k} "
                          f"softmax = before : {e.ty(x)} -> ({wt}, {it})")
    e.types[w], e.types[ids] = wt, it
    return ids


def _group_topk_handler(e, n):
    import torch
    scores, bias, top_k, groups, topk_group = n.args
    t, ne = e.values[scores].shape
    f32 = torch.float32
    st = _ttype((t, ne), f32)
    sv, bv = e.val(scores), e.val(bias)
    sel = e.emit(f"rp.add {sv}, {bv} : ({st}, {e.ty(bv)}) -> {st}", st)
    if groups > 1:
        per = ne // groups
        gt = _ttype((t * groups, per), f32)
        flat = e.emit(f"rp.reshape {sel} : {st} to {gt}", gt)
        best2 = _route(e, flat, 2)
        hot, _ = _onehot(e, best2, per)                      # [TG, 2, per]
        ht = _ttype((t * groups, 2, per), f32)
        ft3 = _ttype((t * groups, 1, per), f32)
        flat3 = e.emit(f"rp.reshape {flat} : {gt} to {ft3}", ft3)
        vals = e.emit(f"rp.mul {hot}, {flat3} : ({ht}, {ft3}) -> {ht}", ht)
        gst = _ttype((t * groups,), f32)
        gsum = e.emit(f"rp.reduce sum {vals} dims = [1, 2] : {ht} -> {gst}",
                      gst)
        gs_t = _ttype((t, groups), f32)
        gs = e.emit(f"rp.reshape {gsum} : {gst} to {gs_t}", gs_t)
        gids = _route(e, gs, topk_group)
        ghot, _ = _onehot(e, gids, groups)             # [T, topk_group, G]
        ght = _ttype((t, topk_group, groups), f32)
        keep_t = _ttype((t, groups), f32)
        keep = e.emit(f"rp.reduce sum {ghot} dims = [1] : {ght} -> {keep_t}",
                      keep_t)
        k3 = _ttype((t, groups, 1), f32)
        keep = e.emit(f"rp.reshape {keep} : {keep_t} to {k3}", k3)
        kb = _ttype((t, groups, per), f32)
        keep = e.emit(f"rp.broadcast {keep} : {k3} to {kb}", kb)
        keep = e.emit(f"rp.reshape {keep} : {kb} to {st}", st)
        zero = e.scalar(0.0, f32)
        bt = _ttype((t, ne), torch.bool)
        cond = e.emit(f"rp.cmp gt, {keep}, {zero} : ({st}, {e.ty(zero)}) -> "
                      f"{bt}", bt)
        ninf = e.scalar(float("-inf"), f32)
        sel = e.emit(f"rp.where {cond}, {sel}, {ninf} : ({bt}, {st}, "
                     f"{e.ty(ninf)}) -> {st}", st)
    return _route(e, sel, top_k)


def _experts_handler(e, n):
    import torch

    x, experts, weights, gate_up, down, act, gate_first = n.args
    tokens, hidden = e.values[x].shape
    n_exp, ffn2, _ = e.values[gate_up].shape
    top_k = e.values[experts].shape[1]
    m = _moe_common.Routed()
    m.tokens, m.hidden = tokens, hidden
    m.dt = dt = e.values[x].dtype
    m.rows = rows = tokens * top_k
    xs, ex = e.val(x), e.val(experts)
    m.w = e.val(weights, dt)
    m.wt = e.ty(m.w)
    m.rt = _ttype((rows, hidden), dt)
    m.pt = _ttype((tokens, top_k), torch.int32)
    m.ct = _ttype((n_exp,), torch.int32)
    m.r, m.p, m.c = e.fresh(), e.fresh(), e.fresh()
    e.region.lines.append(
        f"{m.r}, {m.p}, {m.c} = rp.moe.dispatch {xs}, {ex} : ({e.ty(xs)}, "
        f"{e.ty(ex)}) -> ({m.rt}, {m.pt}, {m.ct})")
    e.types[m.r], e.types[m.p], e.types[m.c] = m.rt, m.pt, m.ct

    def grouped(inp, stack, out_ty):
        return e.emit(f"rp.moe.grouped_matmul {inp}, {stack}, {m.c} "
                      f"transpose_b : ({e.ty(inp)}, {e.ty(stack)}, {m.ct}) "
                      f"-> {out_ty}", out_ty)

    fn, gated, limit = _split_act(act)
    ffn = ffn2 // 2 if gated else ffn2
    both_t = _ttype((rows, ffn2), dt)
    ht = _ttype((rows, ffn), dt)
    both = grouped(m.r, e.val(gate_up), both_t)

    def clamp(v, op, bound):
        c = e.scalar(bound, dt)
        return e.emit(f"rp.{op} {v}, {c} : ({ht}, {e.ty(c)}) -> {ht}", ht)

    def activate(g):
        if fn == "relu2":
            r = e.emit(f"rp.relu {g} : {ht}", ht)
            return e.emit(f"rp.mul {r}, {r} : ({ht}, {ht}) -> {ht}", ht)
        return e.emit(f"rp.{fn} {g} : {ht}", ht)
    if gated:
        lo = e.emit(f"rp.slice {both} offsets = [0, 0] strides = [1, 1] : "
                    f"{both_t} -> {ht}", ht)
        hi = e.emit(f"rp.slice {both} offsets = [0, {ffn}] strides = [1, 1]"
                    f" : {both_t} -> {ht}", ht)
        g, u = (lo, hi) if gate_first else (hi, lo)
        if fn == "oss":
            al, lim = limit
            g = clamp(g, "min", lim)
            u = clamp(clamp(u, "max", -lim), "min", lim)
            alv = e.scalar(al, dt)
            ga = e.emit(f"rp.mul {g}, {alv} : ({ht}, {e.ty(alv)}) -> {ht}",
                        ht)
            sg = e.emit(f"rp.sigmoid {ga} : {ht}", ht)
            a = e.emit(f"rp.mul {g}, {sg} : ({ht}, {ht}) -> {ht}", ht)
            one = e.scalar(1.0, dt)
            u1 = e.emit(f"rp.add {u}, {one} : ({ht}, {e.ty(one)}) -> {ht}",
                        ht)
            h = e.emit(f"rp.mul {u1}, {a} : ({ht}, {ht}) -> {ht}", ht)
            return _moe_common.combine(e, m, grouped(h, e.val(down), m.rt))
        if fn == "softcap":
            def cap(v, c):
                by = e.scalar(c, dt)
                t = e.emit(f"rp.div {v}, {by} : ({ht}, {e.ty(by)}) -> "
                           f"{ht}", ht)
                t = e.emit(f"rp.tanh {t} : {ht}", ht)
                return e.emit(f"rp.mul {t}, {by} : ({ht}, {e.ty(by)}) -> "
                              f"{ht}", ht)
            sg = e.emit(f"rp.sigmoid {g} : {ht}", ht)
            a = e.emit(f"rp.mul {cap(g, limit[0])}, {sg} : ({ht}, {ht}) -> "
                       f"{ht}", ht)
            h = e.emit(f"rp.mul {a}, {cap(u, limit[1])} : ({ht}, {ht}) -> "
                       f"{ht}", ht)
            return _moe_common.combine(e, m, grouped(h, e.val(down), m.rt))
        if limit is not None:
            # As torch.clamp: max with the lower bound, then min with the
            # upper, the input as lhs (rp._aten_compose's clamp).
            g = clamp(g, "min", limit)
            u = clamp(clamp(u, "max", -limit), "min", limit)
        h = e.emit(f"rp.mul {activate(g)}, {u} : ({ht}, {ht}) -> {ht}", ht)
    else:
        h = activate(both)
    y = grouped(h, e.val(down), m.rt)
    return _moe_common.combine(e, m, y)


HANDLERS = {"moe_group_topk": _group_topk_handler,
            "moe_experts": _experts_handler}
