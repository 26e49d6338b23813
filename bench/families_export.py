"""bench/families.py's dynamo export: torch.onnx.export(dynamo=True,
opset 18, optimize=False, rp.onnx_symbolics.dynamo_table()'s
translations), exported again with the eager attention where
torch.export's decomposition of the sdpa attention stops, as a user would
load such a model; and the innermost cause of an exporter's error."""

import contextlib

import torch

# torch.onnx's type promotion pass re-dispatching `1.0 - mask` (a Python
# float minus an int64 tensor) finds no aten.sub overload.
FLOAT_MASK = "Cannot find a compatible OpOverload for aten.sub"


def cause(exc):
    """The exception `exc` was raised from, innermost: torch.onnx's
    ConversionError says only which step stopped and asks for a bug
    report; its cause says why."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return exc


def dynamo_export(model, tokens, onnx_path):
    """`model` on `tokens` to `onnx_path`. Where torch.export's
    decomposition of the sdpa attention views a transposed tensor (Doge,
    Inkling: "Cannot view a tensor with shape ..."), again with
    attn_implementation="eager", as a user loads such a model; where the
    exporter cannot subtract the int64 attention mask from 1.0 (XLNet,
    ProphetNet), again with the mask as float."""
    try:
        _export(model, tokens, onnx_path)
    except Exception as exc:
        why = str(cause(exc))
        if "Cannot view a tensor" in why:
            with attention_implementation(model, "eager"):
                _export(model, tokens, onnx_path)
        elif FLOAT_MASK in why and hasattr(model, "mask_dtype"):
            # torch.onnx's type promotion cannot dispatch `1.0 - mask` for
            # an int64 mask (XLNet, ProphetNet): the float mask these
            # models document, as a user passes it.
            model.mask_dtype = torch.float32
            try:
                _export(model, tokens, onnx_path)
            finally:
                model.mask_dtype = None
        else:
            raise


def _export(model, tokens, onnx_path):
    import torch

    import rp.onnx_symbolics
    # The translations the exporter lacks (aten._is_all_true, erfinv), as
    # a user passes them (rp.onnx_symbolics's docstring).
    torch.onnx.export(model, (tokens,), str(onnx_path),
                      input_names=["input_ids"], output_names=["logits"],
                      opset_version=18, dynamo=True, optimize=False,
                      custom_translation_table=rp.onnx_symbolics
                      .dynamo_table())


@contextlib.contextmanager
def attention_implementation(model, name):
    """The transformers model in `model` set to the attention
    implementation `name` meanwhile (set_attn_implementation, as
    from_pretrained's attn_implementation)."""
    lm = next(m for m in model.modules()
              if hasattr(m, "set_attn_implementation"))
    saved = lm.config._attn_implementation
    lm.set_attn_implementation(name)
    try:
        yield
    finally:
        lm.set_attn_implementation(saved)
