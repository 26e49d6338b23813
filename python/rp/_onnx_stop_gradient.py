"""The stop-gradient marker of rp.onnx_forms.exportable: what a model
computes under torch.no_grad() (HRM's early recurrent cycles, a k-step
gradient) is exported as ordinary ops, which rp-import would train with
gradients on throughout. ``rp::stop_gradient`` is an identity custom op
that the exporters write as one node ``StopGradient`` of the domain
``rp`` (the TorchScript exporter through a symbolic, the dynamo exporter
through rp.onnx_symbolics.dynamo_table()'s translation); rp-import maps
it to rp.stop_gradient, as rp.trace emits it."""

from __future__ import annotations

DOMAIN = "rp"
# Every opset rp-import reads: the marker's symbolic and rp.onnx_symbolics'
# are registered at each (that module takes them from here: this one, which
# rp._onnx_dynamo imports, cannot import it).
OPSETS = range(13, 21)
_DONE = []


def define():
    """The custom op and its TorchScript symbolic (opsets 13 to 20),
    once; returns the op."""
    import torch
    if _DONE:
        return _DONE[0]

    # The schema spelled out: this module's postponed annotations are
    # strings, which custom_op cannot read here.
    @torch.library.custom_op("rp::stop_gradient", mutates_args=(),
                             schema="(Tensor x) -> Tensor")
    def stop_gradient(x):
        return x.clone()

    @stop_gradient.register_fake
    def _(x):
        return torch.empty_like(x)

    def symbolic(g, x):
        return g.op(f"{DOMAIN}::StopGradient", x).setType(x.type())

    for opset in OPSETS:
        torch.onnx.register_custom_op_symbolic("rp::stop_gradient", symbolic,
                                               opset)
    _DONE.append(torch.ops.rp.stop_gradient)
    return _DONE[0]


def translation(x):
    """rp::stop_gradient for the dynamo exporter: the rp-domain node."""
    from onnxscript import values
    _schema()
    return values.Opset(DOMAIN, 1).StopGradient(x)


def _schema():
    """StopGradient's ONNX schema (y = x, floating-point), registered with
    onnx once: onnxscript, which the dynamo exporter writes nodes through,
    calls only ops it has a schema of."""
    from onnx import defs
    if defs.has("StopGradient", DOMAIN):
        return
    tensor = ("T", [f"tensor({t})" for t in (
        "float", "double", "float16", "bfloat16")], "floating point")
    defs.register_schema(defs.OpSchema(
        "StopGradient", DOMAIN, 1,
        doc="y = x; no gradient flows back to x (rp.stop_gradient)",
        inputs=[defs.OpSchema.FormalParameter("x", "T")],
        outputs=[defs.OpSchema.FormalParameter("y", "T")],
        type_constraints=[tensor]))


def marked(value, op):
    """`value` with every floating-point tensor in it through `op`."""
    import torch
    if isinstance(value, torch.Tensor):
        return op(value) if value.is_floating_point() else value
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(marked(v, op) for v in value)
    if isinstance(value, list):
        return [marked(v, op) for v in value]
    return value


def _in_function_forward():
    """Whether a torch.autograd.Function's forward is running (a frame
    holds its ctx): it runs under no_grad and defines its gradient itself
    (Reformer's reversible layers, reentrant checkpointing), which the
    forward's ops, exported as any others, give rp; a stop there would
    drop it."""
    import sys

    from torch.autograd.function import FunctionCtx
    frame = sys._getframe(1)
    while frame is not None:
        if isinstance(frame.f_locals.get("ctx"), FunctionCtx):
            return True
        frame = frame.f_back
    return False


def hooks(model, handles):
    """Hooks on every module of `model` (their handles appended to
    `handles`) marking the outputs of each call that runs under
    torch.no_grad() from a module call with gradients on and that holds
    a trainable parameter: where a no-grad region's values return to the
    gradient. Inner calls of the region are left alone (their values stay
    inside it), and so are calls within a torch.autograd.Function's
    forward."""
    import torch
    stack = []

    def pre(_module, _args):
        stack.append(torch.is_grad_enabled())

    def post(module, _args, output):
        on = stack.pop()
        if on or not stack or not stack[-1] or not any(
                p.requires_grad for p in module.parameters()) or \
                _in_function_forward():
            return None
        # Defined at the first mark only: torch.library.custom_op is torch
        # 2's, and a model without a no-grad region needs none.
        return marked(output, define().default)

    for module in model.modules():
        handles.append(module.register_forward_pre_hook(pre))
        handles.append(module.register_forward_hook(post))
