"""Experts modules whose stacks are not transformers 5's two parameters,
in rp.trace: called as ``experts(x, top_k_index, top_k_weights)`` as
rp._moe_grouped.patch_experts's are, but

- DBRX's: three flat ``[E * F, H]`` parameters of a child ``mlp`` (gate
  ``w1``, up ``v1``, down ``w2``, the down one used untransposed), so the
  stacks are views of them: ``[w1; v1]`` as ``[E, 2F, H]`` and ``w2`` as
  ``[E, F, H]`` transposed;
- LongCat-Flash's: the stacks of its routed experts beside
  ``zero_expert_num`` identity experts (ids past the routed ones, whose
  output is the token itself, weighted): the routed ids go to the
  ``rp_trace::moe_experts`` op with the identity slots' weights zeroed,
  and the token times the identity slots' weights is added.

The stacks are written as torch ops on the parameters, so the gradients
reach them by their names. Each form is checked against the module's own
output on random routing first; a module it does not reproduce is left
to the op-by-op trace (whose data-dependent loop is an rp.TraceError
naming it).
"""

from __future__ import annotations

import types

from rp import _moe_common


def _dbrx_stacks(experts):
    """A function giving (gate_up [E, 2F, H], down [E, H, F]) of a
    DBRX-like experts module, or None."""
    import torch
    mlp = getattr(experts, "mlp", None)
    ps = [getattr(mlp, k, None) for k in ("w1", "v1", "w2")]
    n = getattr(experts, "num_experts", None)
    if not all(isinstance(p, torch.nn.Parameter) and p.dim() == 2
               for p in ps) or not isinstance(n, int) or n < 1 or \
            len({p.shape for p in ps}) != 1 or ps[0].shape[0] % n:
        return None

    def stacks():
        # Read at call time: functional_call has put the traced
        # parameters in place of the module's own.
        w1, v1, w2 = (getattr(experts.mlp, k) for k in ("w1", "v1", "w2"))
        h = w1.shape[1]
        gate, up = w1.view(n, -1, h), v1.view(n, -1, h)
        return torch.cat([gate, up], dim=1), w2.view(n, -1, h).transpose(1, 2)
    return stacks


def _identity_stacks(experts):
    """(stacks, routed) of a LongCat-like experts module (routed experts'
    [E', 2F, H] / [E, H, F] stacks, E' >= E, and identity experts past
    the routed ones), or None."""
    import torch
    gu = getattr(experts, "gate_up_proj", None)
    down = getattr(experts, "down_proj", None)
    routed = getattr(experts, "num_routed_experts", None)
    zero = getattr(experts, "zero_expert_num", None)
    if not isinstance(gu, torch.nn.Parameter) or \
            not isinstance(down, torch.nn.Parameter) or gu.dim() != 3 or \
            down.dim() != 3 or not isinstance(routed, int) or \
            not isinstance(zero, int) or down.shape[0] != routed or \
            gu.shape[0] < routed or gu.shape[1] != 2 * down.shape[2]:
        return None

    def stacks():
        return experts.gate_up_proj[:routed], experts.down_proj
    return stacks, routed


def _forward(stacks, routed, act, gate_first, batch_view):
    import torch

    def forward(hidden_states, top_k_index, top_k_weights, *_):
        shape = hidden_states.shape
        x = hidden_states.reshape(-1, shape[-1])
        w = top_k_weights.to(x.dtype)
        gu, down = stacks()
        if routed is None:
            y = torch.ops.rp_trace.moe_experts(x, top_k_index, w, gu, down,
                                               act, gate_first)
        else:
            keep = top_k_index < routed
            ids = torch.where(keep, top_k_index,
                              torch.zeros_like(top_k_index))
            wr = torch.where(keep, w, torch.zeros_like(w))
            y = torch.ops.rp_trace.moe_experts(x, ids, wr, gu, down, act,
                                               gate_first)
            y = y + x * (w - wr).sum(dim=-1, keepdim=True)
        if batch_view:  # DBRX's: viewed as [first dim, -1, H]
            return y.view(shape[0], -1, shape[-1])
        return y.reshape(shape)
    return forward


def patch(experts, saved, library):
    """Replaces `experts`' forward when it is of a form above and the form
    reproduces it; records it in saved. False otherwise. ``library``
    defines the rp_trace ops (rp._moe's), called once a form is found."""
    import torch

    from rp import _moe_grouped
    stacks, routed = _dbrx_stacks(experts), None
    act_fn = getattr(getattr(experts, "mlp", None), "activation_fn", None)
    if stacks is None:
        found = _identity_stacks(experts)
        if found is None:
            return False
        (stacks, routed), act_fn = found, getattr(experts, "act_fn", None)
    with torch.no_grad():
        gu, down = stacks()
        act = _moe_grouped._act_of(types.SimpleNamespace(
            act_fn=act_fn, gate_up_proj=gu))
        if act is None or act.startswith("plain"):
            return False
        n_ids, h = gu.shape[0] + (getattr(experts, "zero_expert_num", 0)
                                  if routed is not None else 0), gu.shape[2]
        x, ids, w = _moe_common.probe_inputs(n_ids, h, gu.dtype)
        try:
            ref = experts(x, ids, w)
        except Exception:  # noqa: BLE001 - not called this way
            return False
        batch_view = ref.dim() == 3
        for gate_first in (True, False):
            mine = _forward(stacks, routed, act, gate_first, batch_view)
            library()
            y = mine(x, ids, w)
            if y.shape == ref.shape and torch.allclose(y, ref, rtol=1e-4,
                                                       atol=1e-5):
                saved.append((experts, experts.__dict__.get("forward")))
                experts.forward = mine
                return True
    return False

