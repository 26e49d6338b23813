"""JetMoE's mixtures in rp.trace: a mixture of MLP experts and a mixture
of attention heads (per token, the query projection of each chosen expert,
and after attention that expert's output projection).

Both route with ``router.layer`` (a bias-free linear), top-k of the
logits and a softmax over the k chosen, and keep their experts as
``input_linear.weight`` / ``output_linear.weight`` stacks ``[E, out, in]``
that JetMoE's own code splits by how many tokens each expert got (a
``.tolist()`` of a tensor: data-dependent shapes rp cannot trace). Here a
row's expert projection is instead every expert's projection of the row
selected by a one-hot of its expert (integers, no gradient): the same
value, and the same gradient for every stack, as PyTorch's. The block's
forward (the MLP mixture) and the attention mixture's ``map`` and
``reduce`` are replaced while tracing; each is checked against the
module's own on random tokens first.
"""

from __future__ import annotations


def _parts(block):
    """(router linear, top_k, up stack, down stack, bias) or None."""
    import torch
    router = getattr(block, "router", None)
    layer = getattr(router, "layer", None)
    up = getattr(getattr(block, "input_linear", None), "weight", None)
    down = getattr(getattr(block, "output_linear", None), "weight", None)
    bias = getattr(block, "bias", None)
    top_k = getattr(router, "top_k", None)
    if not isinstance(layer, torch.nn.Linear) or layer.bias is not None or \
            not isinstance(top_k, int) or \
            not all(isinstance(p, torch.nn.Parameter) and p.dim() == 3
                    for p in (up, down)) or \
            up.shape[0] != layer.out_features or \
            down.shape[0] != up.shape[0] or \
            not isinstance(bias, torch.nn.Parameter):
        return None
    return layer, top_k


def _route(block, x):
    import torch
    logits = block.router.layer(x).float()
    top, ids = logits.topk(block.router.top_k, dim=1)
    gates = torch.softmax(top, dim=1).type_as(x)
    return logits, ids, gates


def _select(rows, weight, ids):
    """Row r's projection by the stack ``weight[ids[r]]`` ([R, in] ->
    [R, out]): every expert's projection, picked by a one-hot."""
    import torch
    n_exp = weight.shape[0]
    every = torch.matmul(rows.unsqueeze(0), weight.transpose(1, 2))
    onehot = (ids.unsqueeze(1) ==
              torch.arange(n_exp, device=ids.device)).to(rows.dtype)
    return torch.matmul(onehot.unsqueeze(1),
                        every.permute(1, 0, 2)).squeeze(1)


def _moe_forward(block):
    def forward(layer_input):
        b, length, h = layer_input.size()
        x = layer_input.reshape(-1, h)
        _, ids, gates = _route(block, x)
        k = ids.shape[1]
        rows = x.unsqueeze(1).expand(-1, k, -1).reshape(-1, h)
        flat = ids.reshape(-1)
        both = _select(rows, block.input_linear.weight, flat)
        g, u = both.chunk(2, dim=-1)
        out = _select(block.activation(g) * u, block.output_linear.weight,
                      flat)
        y = (out.view(-1, k, h) * gates.unsqueeze(-1)).sum(1)
        return y.view(b, length, h) + block.bias
    return forward


def _moa_map(block):
    def map_(layer_input):
        b, length, h = layer_input.size()
        x = layer_input.reshape(-1, h)
        logits, ids, gates = _route(block, x)
        k = ids.shape[1]
        rows = x.unsqueeze(1).expand(-1, k, -1).reshape(-1, h)
        q = _select(rows, block.input_linear.weight, ids.reshape(-1))
        return q.view(b, length, k, -1), logits, (ids, gates)
    return map_


def _moa_reduce(block):
    def reduce(layer_input, topo_info):
        b, length, k, hid = layer_input.size()
        ids, gates = topo_info
        out = _select(layer_input.reshape(-1, hid),
                      block.output_linear.weight, ids.reshape(-1))
        y = (out.view(b * length, k, -1) * gates.unsqueeze(-1)).sum(1)
        return y.view(b, length, -1) + block.bias
    return reduce


def patch(block, attrs):
    """Replaces a JetMoE mixture's methods (recording (module, name, old)
    in attrs); False when `block` is not one or the replicas do not
    reproduce it."""
    import torch
    if _parts(block) is None:
        return False
    moa = callable(getattr(block, "map", None)) and \
        callable(getattr(block, "reduce", None))
    h = block.router.layer.in_features
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, h, generator=g, dtype=block.bias.dtype)
    try:
        with torch.no_grad():
            if moa:
                q_ref, _, topo = block.map(x)
                q, _, mine = _moa_map(block)(x)
                ok = torch.allclose(q, q_ref, rtol=1e-4, atol=1e-5)
                a = torch.randn(q.shape, generator=g, dtype=q.dtype)
                ok = ok and torch.allclose(
                    _moa_reduce(block)(a, mine), block.reduce(a, topo),
                    rtol=1e-4, atol=1e-5)
            else:
                ok = torch.allclose(_moe_forward(block)(x), block(x),
                                    rtol=1e-4, atol=1e-5)
    except Exception:  # noqa: BLE001 - not called this way: not this form
        return False
    if not ok:
        return False
    new = {"map": _moa_map(block), "reduce": _moa_reduce(block)} if moa \
        else {"forward": _moe_forward(block)}
    for name, fn in new.items():
        attrs.append((block, name, block.__dict__.get(name)))
        setattr(block, name, fn)
    return True
