"""Attention kept within each document of a packed row, from the
documents' ids rather than an S x S mask (``python -m rp finetune``'s
traced models, docs/finetune.md "Attention stays within each document").

``rp_trace::segment_attention(q, k, v, segments, scale)`` is causal
attention where a query keeps the keys of its own document: ``segments``
is ``[batch, seq]`` (int64, a document index per token, -1 on padding).
The tracer records it as one node and writes ``rp.attention q, k, v
mask(%segments) causal``: rp.attention reads an i64 ``[batch, keys]`` mask
as segment ids, so nothing of size S x S exists in the graph or on a
device (a boolean mask is ``batch x S x S`` bytes a layer, 1 GiB a row at
32k tokens). Run eagerly (the CPU implementation) it is PyTorch's
``scaled_dot_product_attention`` with the equivalent block-diagonal causal
mask.

``positions`` gives each token's position within its document in O(S)
memory (a log-step running maximum of the documents' first indices), for
the rotary tables.
"""

from __future__ import annotations

from rp._irtext import _ttype

_LIB = None
# transformers' attention-implementation name while tracing.
IMPLEMENTATION = "rp_segments"
# The segment ids of the forward being traced (rp.finetune's LogitsOnly
# sets them), for models that do not pass keywords down to attention.
CURRENT = None


def block_mask(segments, window: int = 0):
    """The keep mask ``[batch, 1, S, S]`` the op means: the same document
    and not a later token (nor one ``window`` or more before, window > 0)."""
    import torch
    seq = segments.shape[1]
    same = segments[:, :, None] == segments[:, None, :]
    keep = torch.ones(seq, seq, dtype=torch.bool,
                      device=segments.device).tril()
    if window > 0:
        keep = keep & ~keep.tril(-window)
    return (same & keep)[:, None]


def define():
    """Defines rp_trace::segment_attention once."""
    global _LIB
    if _LIB is None:
        import torch
        import torch.nn.functional as F
        lib = torch.library.Library("rp_trace", "FRAGMENT")
        lib.define("segment_attention(Tensor q, Tensor k, Tensor v, "
                   "Tensor segments, float scale, int window, "
                   "float softcap) -> Tensor")

        def impl(q, k, v, segments, scale, window, softcap):
            group = q.shape[1] // k.shape[1]
            k = k.repeat_interleave(group, dim=1)
            v = v.repeat_interleave(group, dim=1)
            with torch.no_grad():
                scores = (q @ k.transpose(-1, -2)) * scale
                if softcap > 0:
                    scores = softcap * torch.tanh(scores / softcap)
                scores = scores.masked_fill(~block_mask(segments, window),
                                            float("-inf"))
                return F.softmax(scores, dim=-1) @ v

        lib.impl("segment_attention", impl, "CPU")
        lib.define("segment_sink_attention(Tensor q, Tensor k, Tensor v, "
                   "Tensor segments, Tensor sinks, float scale, int window, "
                   "float softcap) -> Tensor")

        def sink_impl(q, k, v, segments, sinks, scale, window, softcap):
            with torch.no_grad():
                return sink_attention(q, k, v, segments, sinks, scale, window,
                                      softcap).transpose(1, 2).contiguous()

        lib.impl("segment_sink_attention", sink_impl, "CPU")
        _LIB = lib
    return _LIB


def attention(module, query, key, value, attention_mask, scaling=None,
              dropout=0.0, **kwargs):
    """transformers' attention interface (``AttentionInterface``): the
    segments come as the ``rp_segments`` keyword the model passes down to
    its attention layers; ``attention_mask`` is None (no mask function is
    registered for this implementation, so transformers builds none)."""
    import torch
    # A model whose decoder layers drop the keywords (StableLM's) still
    # reaches this function: the segments of the forward being traced.
    segments = kwargs.get("rp_segments", CURRENT)
    if segments is None:
        raise NotImplementedError(
            "rp finetune: the model's attention got no document ids "
            "(rp_segments), and no traced forward is running")
    if dropout:
        raise NotImplementedError(
            f"rp finetune: attention dropout {dropout}: rp has no random ops "
            "in attention (set the config's attention_dropout to 0)")
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    # Sliding-window layers (Mistral's, Qwen's, Gemma's local ones) and
    # Gemma 2's soft-capped scores, as their flash-attention path takes
    # them.
    window = int(kwargs.get("sliding_window") or 0)
    softcap = float(kwargs.get("softcap") or 0.0)
    if kwargs.get("s_aux") is not None:
        out = torch.ops.rp_trace.segment_sink_attention(
            query, key, value, segments, kwargs["s_aux"], float(scaling),
            window, softcap)
        return out.transpose(1, 2).contiguous(), None
    out = torch.ops.rp_trace.segment_attention(query, key, value, segments,
                                               float(scaling), window, softcap)
    return out.transpose(1, 2).contiguous(), None


def sink_attention(query, key, value, segments, sinks, scaling, window=0,
                   softcap=0.0):
    """Attention with a learned sink logit per head (gpt-oss's ``s_aux``):
    each query's softmax runs over its document's kept keys and the sink,
    whose probability is dropped (the sink has no value), as transformers'
    eager gpt-oss attention computes it: the eager value of
    ``rp_trace::segment_sink_attention``, which the tracer writes as one
    ``rp.attention ... mask(%segments) sinks(%sinks) causal`` (nothing
    S x S in the graph; autodiff gives the sinks their gradient through
    rp.attention_grad). Returns ``[batch, seq, heads, dim]``."""
    import torch
    group = query.shape[1] // key.shape[1]
    key = key.repeat_interleave(group, dim=1)
    value = value.repeat_interleave(group, dim=1)
    scores = torch.matmul(query, key.transpose(-1, -2)) * scaling
    if softcap > 0:
        scores = softcap * torch.tanh(scores / softcap)
    scores = scores.masked_fill(~block_mask(segments, window), float("-inf"))
    batch, heads, seq, _ = scores.shape
    sink = sinks.reshape(1, heads, 1, 1).expand(batch, heads, seq, 1)
    logits = torch.cat([scores, sink.to(scores.dtype)], dim=-1)
    # The row's maximum out first, as transformers does (bf16 overflow).
    logits = logits - logits.max(dim=-1, keepdim=True).values
    probs = torch.softmax(logits, dim=-1)[..., :-1]
    out = torch.matmul(probs.to(value.dtype), value)
    return out.transpose(1, 2).contiguous()


def register():
    """Makes ``IMPLEMENTATION`` a transformers attention implementation."""
    define()
    from transformers import AttentionInterface
    AttentionInterface.register(IMPLEMENTATION, attention)


def positions(segments):
    """Each token's position within its document (documents contiguous in
    a row, as rp.data packs them): its index minus its document's first
    index, that found as a running maximum over log2(S) shifted copies
    (O(S) memory, where counting the kept keys of an S x S mask is
    O(S^2))."""
    import torch
    batch, seq = segments.shape
    index = torch.arange(seq, device=segments.device)[None].expand(batch, seq)
    starts = torch.cat([torch.ones(batch, 1, dtype=torch.bool,
                                   device=segments.device),
                        segments[:, 1:] != segments[:, :-1]], dim=1)
    first = torch.where(starts, index, torch.zeros_like(index))
    shift = 1
    while shift < seq:
        earlier = torch.cat([torch.zeros(batch, shift, dtype=first.dtype,
                                          device=first.device),
                             first[:, :-shift]], dim=1)
        first = torch.maximum(first, earlier)
        shift *= 2
    return index - first


def _segment_attention(e, n):
    """rp.attention with the segments as its i64 mask, ``causal``, and the
    window and soft-cap when set."""
    q, k, v, segments, scale, window, softcap = n.args
    ops = [e.val(q), e.val(k), e.val(v), e.val(segments)]
    out = e.values[n]
    ty = _ttype(out.shape, out.dtype)
    extra = (f" window = {int(window)}" if window > 0 else "") + \
        (f" softcap = {'%.17e' % float(softcap)}" if softcap > 0 else "")
    return e.emit(
        f"rp.attention {ops[0]}, {ops[1]}, {ops[2]} mask({ops[3]}) causal "
        f"scale = {'%.17e' % float(scale)}{extra} : "
        f"({', '.join(e.ty(x) for x in ops)}) -> {ty}", ty)


def _segment_sink_attention(e, n):
    """rp.attention with the segments as its i64 mask and GPT-OSS's sinks
    (``[heads]``, cast to the query's type where they differ)."""
    q, k, v, segments, sinks, scale, window, softcap = n.args
    ops = [e.val(q), e.val(k), e.val(v), e.val(segments), e.val(sinks)]
    qv, sv = e.values[q], e.values[sinks]
    if sv.dtype != qv.dtype:
        ty = _ttype(sv.shape, qv.dtype)
        ops[4] = e.emit(f"rp.cast {ops[4]} : {e.ty(ops[4])} to {ty}", ty)
    out = e.values[n]
    ty = _ttype(out.shape, out.dtype)
    extra = (f" window = {int(window)}" if window > 0 else "") + \
        (f" softcap = {'%.17e' % float(softcap)}" if softcap > 0 else "")
    return e.emit(
        f"rp.attention {ops[0]}, {ops[1]}, {ops[2]} mask({ops[3]}) "
        f"sinks({ops[4]}) causal scale = {'%.17e' % float(scale)}{extra} : "
        f"({', '.join(e.ty(x) for x in ops)}) -> {ty}", ty)


HANDLERS = {"segment_attention": _segment_attention,
            "segment_sink_attention": _segment_sink_attention}


# Float attributes attention layers copy from the config and pass to the
# attention function as its dropout (Llama's and most models'
# ``attention_dropout``).
_DROPOUT_ATTRS = ("attention_dropout", "attn_dropout", "dropout")


def dropout_off(model) -> list:
    """Sets every dropout of ``model`` to 0 (``nn.Dropout`` modules and the
    attention layers' dropout probabilities) and returns what was on, as
    ``"name p"`` strings: rp traces one graph with no random ops, in
    training mode, so a model whose config keeps GPT-2's dropout 0.1 could
    not be traced at all."""
    import torch
    was = []
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Dropout) and module.p > 0:
            was.append(f"{name or 'model'} {module.p:g}")
            module.p = 0.0
        for attr in _DROPOUT_ATTRS:
            value = getattr(module, attr, None)
            if isinstance(value, float) and value > 0:
                was.append(f"{name}.{attr} {value:g}")
                setattr(module, attr, 0.0)
    return was
