"""Model forms an ONNX exporter can write and rp-import can map, as a user
applies them around ``torch.onnx.export`` (beside rp.onnx_symbolics).

JetMoE's mixtures of MLP experts and of attention heads split their tokens
by a ``.tolist()`` of the routing (data-dependent shapes: the TorchScript
exporter stops at ``index_add`` with repeated indices, torch.export bakes
the example's routing in) and recombine them with ``index_add``. Within
``exportable(model)`` each such block runs rp.trace's form instead
(``rp._moe_jetmoe``: every expert's projection of a row picked by a
comparison of its expert with every class; the same value and gradient,
checked against the block on random tokens first), which exports as
ordinary ops behind the router's TopK:

    with rp.onnx_forms.exportable(model):
        torch.onnx.export(model, (input_ids,), "model.onnx", ...)

A module with trainable parameters that a module with gradients on calls
under ``torch.no_grad()`` (HRM's early recurrent cycles: a gradient
through the last cycles only) has its floating-point outputs exported
through ``rp::stop_gradient``, one node ``StopGradient`` of the domain
``rp`` that rp-import maps to rp.stop_gradient (rp.trace's op for the
same), so rp trains the gradient PyTorch takes. The dynamo exporter needs
``custom_translation_table=rp.onnx_symbolics.dynamo_table()`` for it. A
no-grad region without such a module call (inline ops under
``torch.no_grad()`` whose values return to the gradient) is not marked.
"""

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def exportable(model):
    """Every JetMoE mixture of `model` in rp.trace's form meanwhile (blocks
    of other forms untouched), and the values a no-grad region returns to
    the gradient marked (rp._onnx_stop_gradient)."""
    from rp import _moe_jetmoe, _onnx_stop_gradient
    attrs = []
    handles = []
    try:
        for module in model.modules():
            _moe_jetmoe.patch(module, attrs)
        _onnx_stop_gradient.hooks(model, handles)
        yield model
    finally:
        for handle in handles:
            handle.remove()
        for block, name, old in reversed(attrs):
            if old is None:
                block.__dict__.pop(name, None)
            else:
                setattr(block, name, old)
