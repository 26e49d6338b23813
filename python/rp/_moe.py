"""Mixture-of-experts blocks in rp.trace.

A block's PyTorch forward routes with data-dependent control flow (which
tokens each expert gets), which a static trace cannot record. So before
tracing, rp.trace finds the blocks by their structure, not their class:
a module with a bias-free ``nn.Linear`` router of ``E`` outputs and an
``nn.ModuleList`` of ``E`` experts, each holding three bias-free linear
layers (two ``[F, H]``, one ``[H, F]``) and a ``top_k`` (or
``num_experts_per_tok``) attribute. Which linear is gated, the activation,
whether the top-k weights are renormalised and whether another child adds
a shared expert (``+ S(x)``, or ``+ sigmoid(G(x)) * S(x)`` with a
one-output linear ``G``, as Qwen2-MoE) are then found by running the block:
a form that reproduces its output on random tokens is the one traced, and
a block no form reproduces (expert biases, a capacity, another router) is
an error naming it. transformers 5's blocks hold the experts as two
stacked parameters of one module instead (``[E, 2F, H]`` gate and up,
``[E, H, F]`` down) beside a router module with a bare ``[E, H]`` weight;
that form is found and probed the same way and traced as
``rp_trace::moe_swiglu_fused``, one grouped matmul by the gate-and-up
stack whose output is sliced in two (GPT-OSS's form is rp._moe_oss's).
While tracing, the block's forward becomes the router linear and one
``rp_trace::moe_swiglu`` op (recorded as one node), which the handler here
writes as rp.moe.route, rp.moe.dispatch, three rp.moe.grouped_matmul, the
activation and rp.moe.combine. A model module's
``load_balancing_loss_func`` (transformers' Switch/Mixtral auxiliary loss)
is replaced meanwhile by ``_aux_loss``, the same math with its top-k
one-hot as ``rp_trace::moe_expert_mask`` (docs/moe.md).
"""

from __future__ import annotations

import contextlib
import sys

from rp import (_moe_common, _moe_grouped, _moe_jetmoe, _moe_oss,
                _moe_stacked)
from rp._irtext import TraceError, _ttype

_ACTS = ("silu", "gelu")
_LIB = None


def _act(kind, x):
    import torch.nn.functional as F
    return F.silu(x) if kind == "silu" else F.gelu(x)


def _reference(x, logits, w_gate, w_up, w_down, top_k, normalize, act):
    """The block's math on real tensors: softmax, top-k (PyTorch's), the
    chosen experts' gated MLPs, the weighted sum."""
    import torch
    probs = torch.softmax(logits.float(), dim=-1)
    weights, experts = torch.topk(probs, top_k, dim=-1)
    if normalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    weights = weights.to(x.dtype)
    out = torch.zeros_like(x)
    for e in range(len(w_gate)):
        tok, slot = torch.where(experts == e)
        if tok.numel() == 0:
            continue
        xe = x[tok]
        h = _act(act, xe @ w_gate[e].t()) * (xe @ w_up[e].t())
        out.index_add_(0, tok, (h @ w_down[e].t()) * weights[tok, slot, None])
    return out


def _expert_mask(logits, top_k):
    """[T, K, E] f32: one-hot of each token's top-k experts by softmax."""
    import torch
    _, experts = torch.topk(torch.softmax(logits.float(), dim=-1), top_k,
                            dim=-1)
    return torch.nn.functional.one_hot(experts, logits.shape[-1]).float()


def _aux_loss(gate_logits, num_experts=None, top_k=2, attention_mask=None):
    """The Switch/Mixtral load-balancing loss as transformers'
    load_balancing_loss_func defines it, in a form rp.trace records: with
    the router logits of every layer stacked (``[N, E]``), ``E * sum_e
    f_e * P_e``, ``f_e`` the share of the ``N * top_k`` choices that went
    to expert ``e`` and ``P_e`` its mean router probability, both over the
    tokens the attention mask keeps. The choices (top-k, one-hot) are the
    op rp_trace::moe_expert_mask; they carry no gradient."""
    import torch
    if not isinstance(gate_logits, tuple) or not gate_logits:
        return 0
    logits = torch.cat(list(gate_logits), dim=0)
    n, e = logits.shape
    probs = torch.softmax(logits, dim=-1)
    mask = torch.ops.rp_trace.moe_expert_mask(logits, top_k)
    if attention_mask is None:
        share, prob = mask.mean(dim=0), probs.mean(dim=0)
    else:
        keep = attention_mask.reshape(1, -1).expand(
            n // attention_mask.numel(), -1).reshape(n).to(probs.dtype)
        kept = keep.sum()
        share = (mask * keep[:, None, None]).sum(dim=0) / kept
        prob = (probs * keep[:, None]).sum(dim=0) / kept
    return (share * prob[None]).sum() * (num_experts or e)


def _library():
    """Defines rp_trace::moe_swiglu once: an op the tracer records as one
    node, computed by _reference when the graph runs on real tensors."""
    global _LIB
    if _LIB is None:
        import torch
        lib = torch.library.Library("rp_trace", "DEF")
        lib.define("moe_swiglu(Tensor x, Tensor logits, Tensor[] w_gate, "
                   "Tensor[] w_up, Tensor[] w_down, int top_k, bool normalize, "
                   "str act) -> Tensor")

        def impl(x, logits, w_gate, w_up, w_down, top_k, normalize, act):
            with torch.no_grad():
                return _reference(x, logits, w_gate, w_up, w_down, top_k,
                                  normalize, act)

        lib.impl("moe_swiglu", impl, "CPU")
        lib.define("moe_swiglu_fused(Tensor x, Tensor logits, Tensor gate_up, "
                   "Tensor down, int top_k, bool normalize, str act, "
                   "bool gate_first) -> Tensor")

        def fused_impl(x, logits, gate_up, down, top_k, normalize, act,
                       gate_first):
            with torch.no_grad():
                w_gate, w_up, w_down = _split_fused(gate_up, down, gate_first)
                return _reference(x, logits, w_gate, w_up, w_down, top_k,
                                  normalize, act)

        lib.impl("moe_swiglu_fused", fused_impl, "CPU")
        lib.define("moe_expert_mask(Tensor logits, int top_k) -> Tensor")

        def mask_impl(logits, top_k):
            with torch.no_grad():
                return _expert_mask(logits, top_k)

        lib.impl("moe_expert_mask", mask_impl, "CPU")
        _moe_oss.define(lib)
        _moe_grouped.define(lib)
        _LIB = lib
    return _LIB


def _linears(module):
    import torch
    return [(name, m) for name, m in module.named_children()
            if isinstance(m, torch.nn.Linear)]


def _candidate(path, block):
    """(router, experts, top_k) when `block` has the MoE structure."""
    import torch
    lins = [m for _, m in _linears(block) if m.bias is None]
    lists = [m for _, m in block.named_children()
             if isinstance(m, torch.nn.ModuleList)]
    for router in lins:
        e = router.out_features
        for experts in lists:
            if len(experts) != e or e < 2:
                continue
            ok = True
            for ex in experts:
                ls = [m for _, m in _linears(ex)]
                if len(ls) != 3 or any(m.bias is not None for m in ls):
                    ok = False
                    break
            if not ok:
                continue
            return router, experts, _moe_common.top_k_of(path, block, router, e)
    return _fused_candidate(path, block)


def _fused_candidate(path, block):
    """(router, Fused, top_k) when `block` holds its experts as stacked
    weights (transformers 5): a router child whose only parameter is a
    [E, H] `weight`, and an experts child whose own parameters are exactly
    a [E, 2F, H] gate-and-up stack and a [E, H, F] down stack."""
    for router in block.children():
        params = dict(router.named_parameters())
        w = params.get("weight")
        if len(params) != 1 or w is None or w.dim() != 2 or w.shape[0] < 2:
            continue
        e, hidden = w.shape
        for experts in block.children():
            if experts is router:
                continue
            own = dict(experts.named_parameters(recurse=False))
            if len(own) != 2 or any(p.dim() != 3 or p.shape[0] != e
                                    for p in own.values()):
                continue
            names = sorted(own)
            for up_name, down_name in (names, names[::-1]):
                up, down = own[up_name], own[down_name]
                if up.shape[2] == hidden and down.shape[1] == hidden and \
                        up.shape[1] == 2 * down.shape[2]:
                    return (router, Fused(experts, up_name, down_name),
                            _moe_common.top_k_of(path, block, router, e))
    return None


class Fused:
    """Experts stored as two stacked parameters of one module."""

    def __init__(self, module, up_name, down_name):
        self.module, self.up_name, self.down_name = module, up_name, down_name

    def stacks(self):
        """The stacks as they are now (traced parameters while tracing)."""
        return (getattr(self.module, self.up_name),
                getattr(self.module, self.down_name))


def _split_fused(gate_up, down, gate_first):
    """Per-expert (gate, up, down) weights of a [E, 2F, H] / [E, H, F] pair."""
    f = down.shape[2]
    lo, hi = gate_up[:, :f], gate_up[:, f:]
    w_gate, w_up = (lo, hi) if gate_first else (hi, lo)
    return list(w_gate), list(w_up), list(down)


def _expert_roles(path, ex, hidden):
    """(gate candidates, down) of one expert: the [F, H] pair, the [H, F]."""
    ls = [m for _, m in _linears(ex)]
    ups = [m for m in ls if m.in_features == hidden]
    downs = [m for m in ls if m.out_features == hidden and
             m.in_features != hidden]
    if len(ups) != 2 or len(downs) != 1 or \
            ups[0].out_features != downs[0].in_features or \
            ups[1].out_features != downs[0].in_features:
        raise TraceError(
            f"rp.trace: expert of '{path}' has linear layers "
            f"{[tuple(m.weight.shape) for m in ls]}, not a gated MLP "
            f"(two [F, {hidden}] and one [{hidden}, F])", module_path=path)
    return ups, downs[0]


def _shared_forms(block, router, experts):
    """(shared, gate) pairs the block may add to the experts' sum: nothing,
    another child module S (a shared expert: + S(x)), or S scaled by a
    one-output linear G (Qwen-MoE: + sigmoid(G(x)) * S(x))."""
    import torch
    held = experts.module if isinstance(experts, Fused) else experts
    others = [m for m in block.children()
              if m is not router and m is not held]
    gates = [m for m in others if isinstance(m, torch.nn.Linear) and
             m.out_features == 1 and
             m.in_features == router.weight.shape[1]]
    shared = [m for m in others if m not in gates]
    forms = [(None, None)]
    for s in shared:
        forms.append((s, None))
        forms.extend((s, g) for g in gates)
    return forms


def _shared_term(x, shared, gate):
    import torch
    y = shared(x)
    return torch.sigmoid(gate(x)) * y if gate is not None else y


def _weights(experts, roles, gate_first):
    """(gate, up, down) weight lists of the experts as they are now."""
    if isinstance(experts, Fused):
        return _split_fused(*experts.stacks(), gate_first)
    w_gate = [(u[0] if gate_first else u[1]).weight for u, _ in roles]
    w_up = [(u[1] if gate_first else u[0]).weight for u, _ in roles]
    return w_gate, w_up, [d.weight for _, d in roles]


def _probe(path, block, router, experts, roles, top_k):
    """The form (gate index, activation, normalize, tuple output, shared
    expert, its gate) reproducing the block."""
    import torch
    import torch.nn.functional as F
    hidden = router.weight.shape[1]
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, hidden, generator=g,
                    dtype=router.weight.dtype)
    with torch.no_grad():
        out = block(x)
        ref = out[0] if isinstance(out, tuple) else out
        flat = x.reshape(-1, hidden)
        logits = F.linear(flat, router.weight)
        for shared, sgate in _shared_forms(block, router, experts):
            extra = 0
            if shared is not None:
                try:
                    extra = _shared_term(flat, shared, sgate)
                except Exception:  # not a module of x alone
                    continue
            for gate_first in (True, False):
                w_gate, w_up, w_down = _weights(experts, roles, gate_first)
                for act in _ACTS:
                    for normalize in (True, False):
                        got = _reference(flat, logits, w_gate, w_up, w_down,
                                         top_k, normalize, act) + extra
                        if got.shape == ref.reshape(-1, hidden).shape and \
                                torch.allclose(got.reshape(ref.shape), ref,
                                               rtol=1e-4, atol=1e-5):
                            return (gate_first, act, normalize,
                                    isinstance(out, tuple), shared, sgate)
    count = router.weight.shape[0]
    biased = [n for n, _ in router.named_buffers()] + [
        n for n, _ in block.named_buffers(recurse=False)]
    what = (f" (its router holds {', '.join(biased)}: sigmoid scores with a "
            f"correction bias or group-limited top-k, as DeepSeek-V3, are "
            f"such a router)" if biased else "")
    raise TraceError(
        f"rp.trace: module '{path}' ({type(block).__name__}) has a router and "
        f"{count} experts, but its output is not the top-{top_k} "
        f"softmax-weighted sum of gated-MLP experts (plus a shared expert) rp "
        f"maps to its MoE ops; expert biases, a capacity or another router "
        f"are not supported yet{what}. To train the model, give the block "
        f"softmax top-k routing (a config option where the model has one) "
        f"or replace its forward with that form", op="moe routing",
        module_path=path)


@contextlib.contextmanager
def patched(module):
    """Within the block, every MoE block's forward is the traceable form."""
    import torch
    saved, funcs, attrs = [], [], []
    try:
        for path, block in list(module.named_modules()):
            if any(block is m for m, _ in saved):
                continue
            if _moe_jetmoe.patch(block, attrs):
                continue
            if _moe_grouped.candidate(path, block) is not None:
                _library()
                _moe_grouped.patch(path, block, saved)
                continue
            found = _candidate(path, block)
            if found is None:
                if _moe_grouped.patch_experts(path, block, saved):
                    _library()
                    continue
                if _moe_stacked.patch(block, saved, _library):
                    continue
                oss = _moe_oss.candidate(path, block)
                if oss is not None:
                    router, experts, top_k, names = oss
                    interleaved, as_tuple = _moe_oss.probe(
                        path, block, router, experts, top_k, names)
                    _library()
                    saved.append((block, block.__dict__.get("forward")))
                    block.forward = _moe_oss.forward_for(
                        router, experts, top_k, names, interleaved, as_tuple)
                continue
            router, experts, top_k = found
            try:
                roles = None if isinstance(experts, Fused) else [
                    _expert_roles(path, ex, router.in_features)
                    for ex in experts]
                gate_first, act, normalize, as_tuple, shared, sgate = _probe(
                    path, block, router, experts, roles, top_k)
            except TraceError:
                # A router rp does not map as a whole over stacked experts:
                # the experts alone become the rp.moe ops, the router is
                # traced op by op.
                if isinstance(experts, Fused) and \
                        _moe_grouped.patch_experts(path, experts.module,
                                                   saved):
                    _library()
                    continue
                raise
            except Exception as exc:  # the block rejects the probe's input
                # A block that needs more than the hidden states (DeepSeek
                # V4's hash routing reads the token ids): its stacked
                # experts alone become the rp.moe ops, the router is traced
                # op by op.
                if isinstance(experts, Fused) and \
                        _moe_grouped.patch_experts(path, experts.module,
                                                   saved):
                    _library()
                    continue
                raise TraceError(
                    f"rp.trace: module '{path}' ({type(block).__name__}) "
                    f"looks like a mixture-of-experts block, but running it "
                    f"on random tokens to find its form failed with "
                    f"{type(exc).__name__}: {exc}; rp maps softmax top-k "
                    f"routing over gated-MLP experts only",
                    op="moe routing", module_path=path) from exc
            _library()

            def forward(hidden_states, *_, _r=router, _ex=experts,
                        _roles=roles, _k=top_k, _gf=gate_first, _act=act,
                        _n=normalize, _tuple=as_tuple, _s=shared, _sg=sgate):
                shape = hidden_states.shape
                x = hidden_states.reshape(-1, shape[-1])
                # Read the weights here, where functional_call has put the
                # traced parameters in place of the modules' own.
                if isinstance(_r, torch.nn.Linear):
                    logits = _r(x)
                else:
                    logits = torch.nn.functional.linear(x, _r.weight)
                    _moe_common.run_router_hooks(_r, x, logits)
                if isinstance(_ex, Fused):
                    y = torch.ops.rp_trace.moe_swiglu_fused(
                        x, logits, *_ex.stacks(), _k, _n, _act, _gf)
                else:
                    y = torch.ops.rp_trace.moe_swiglu(
                        x, logits, *_weights(_ex, _roles, _gf), _k, _n, _act)
                if _s is not None:
                    y = y + _shared_term(x, _s, _sg)
                y = y.reshape(shape)
                return (y, logits) if _tuple else y

            saved.append((block, block.__dict__.get("forward")))
            block.forward = forward
        if saved:
            # A model that adds the load-balancing loss calls its module's
            # load_balancing_loss_func (transformers' MoE models each have
            # one); rp.trace records ours instead.
            for m in module.modules():
                mod = sys.modules.get(type(m).__module__)
                if callable(getattr(mod, "load_balancing_loss_func", None)) \
                        and all(mod is not s for s, _ in funcs):
                    funcs.append((mod, mod.load_balancing_loss_func))
                    mod.load_balancing_loss_func = _aux_loss
        yield
    finally:
        for block, old in saved:
            if old is None:
                del block.forward
            else:
                block.forward = old
        for mod, old in funcs:
            mod.load_balancing_loss_func = old
        for mod, name, old in reversed(attrs):
            if old is None:
                delattr(mod, name)
            else:
                setattr(mod, name, old)


def _stack(e, nodes):
    """[E, a, b] from E weights [a, b]: reshapes and one concat."""
    parts = []
    for w in nodes:
        v = e.values[w]
        ssa = e.val(w)
        ty = _ttype((1,) + tuple(v.shape), v.dtype)
        parts.append(e.emit(f"rp.reshape {ssa} : {e.ty(ssa)} to {ty}", ty))
    v = e.values[nodes[0]]
    ty = _ttype((len(nodes),) + tuple(v.shape), v.dtype)
    return e.emit(f"rp.concat {', '.join(parts)} dim = 0 : "
                  f"({', '.join(e.ty(p) for p in parts)}) -> {ty}", ty)


def _moe_swiglu(e, n):
    x, logits, w_gate, w_up, w_down, top_k, normalize, act = n.args
    ffn = e.values[w_gate[0]].shape[0]

    def experts(grouped, r, ht):
        return (grouped(r, _stack(e, w_gate), ht),
                grouped(r, _stack(e, w_up), ht), _stack(e, w_down))

    return _moe_block(e, x, logits, len(w_gate), ffn, top_k, normalize, act,
                      experts)


def _moe_swiglu_fused(e, n):
    """The stacked form: one grouped matmul by the [E, 2F, H] gate-and-up
    stack, its halves sliced apart."""
    x, logits, gate_up, down, top_k, normalize, act, gate_first = n.args
    n_exp, ffn2, _ = e.values[gate_up].shape
    ffn = ffn2 // 2

    def experts(grouped, r, ht):
        rows = e.values[x].shape[0] * top_k
        both_t = _ttype((rows, ffn2), e.values[x].dtype)
        both = grouped(r, e.val(gate_up), both_t)
        lo = e.emit(f"rp.slice {both} offsets = [0, 0] strides = [1, 1] : "
                    f"{both_t} -> {ht}", ht)
        hi = e.emit(f"rp.slice {both} offsets = [0, {ffn}] strides = [1, 1] "
                    f": {both_t} -> {ht}", ht)
        g, u = (lo, hi) if gate_first else (hi, lo)
        return g, u, e.val(down)

    return _moe_block(e, x, logits, n_exp, ffn, top_k, normalize, act,
                      experts)


def _moe_block(e, x, logits, n_exp, ffn, top_k, normalize, act, experts):
    """route, dispatch, the experts' gated MLP as grouped matmuls
    (`experts` gives the gate and up products and the down stack), the
    weighted combine."""
    flag = " normalize" if normalize else ""
    m = _moe_common.route_dispatch(e, x, logits, n_exp, top_k, "before" + flag)
    ct, c, dt, rows = m.ct, m.c, m.dt, m.rows
    r, rt = m.r, m.rt

    def grouped(inp, stack, out_ty):
        return e.emit(f"rp.moe.grouped_matmul {inp}, {stack}, {c} transpose_b "
                      f": ({e.ty(inp)}, {e.ty(stack)}, {ct}) -> {out_ty}",
                      out_ty)

    ht = _ttype((rows, ffn), dt)
    g, u, w_down = experts(grouped, r, ht)
    a = e.emit(f"rp.{act} {g} : {ht}", ht)
    h = e.emit(f"rp.mul {a}, {u} : ({ht}, {ht}) -> {ht}", ht)
    y = grouped(h, w_down, rt)
    return _moe_common.combine(e, m, y)


def _moe_expert_mask(e, n):
    """rp.moe.route's experts compared with 0 .. E-1: the one-hot mask."""
    import torch
    logits, top_k = n.args
    tokens, n_exp = e.values[logits].shape
    dt = e.values[logits].dtype
    ls = e.val(logits)
    wt = _ttype((tokens, top_k), dt)
    ext = _ttype((tokens, top_k), torch.int64)
    w, ex = e.fresh(), e.fresh()
    e.region.lines.append(
        f"{w}, {ex} = rp.moe.route {ls} top_k = {top_k} softmax = before : "
        f"{e.ty(ls)} -> ({wt}, {ext})")
    e.types[w], e.types[ex] = wt, ext
    col = _ttype((tokens, top_k, 1), torch.int64)
    c = e.emit(f"rp.reshape {ex} : {ext} to {col}", col)
    ids = e.constant(torch.arange(n_exp).reshape(1, 1, n_exp))
    bt = _ttype((tokens, top_k, n_exp), torch.bool)
    hit = e.emit(f"rp.cmp eq, {c}, {ids} : ({col}, {e.ty(ids)}) -> {bt}", bt)
    ft = _ttype((tokens, top_k, n_exp), torch.float32)
    return e.emit(f"rp.cast {hit} : {bt} to {ft}", ft)


HANDLERS = {"moe_swiglu": _moe_swiglu, "moe_swiglu_fused": _moe_swiglu_fused,
            "moe_expert_mask": _moe_expert_mask, "moe_oss": _moe_oss.handler,
            **_moe_grouped.HANDLERS}
