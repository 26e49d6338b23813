"""bench/families.py's dynamo export: torch.onnx.export(dynamo=True,
opset 18, optimize=False, rp.onnx_symbolics.dynamo_table()'s
translations), exported again with the eager attention where
torch.export's decomposition of the sdpa attention stops, as a user would
load such a model; and the innermost cause of an exporter's error."""

import contextlib
import re

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


def export_why(text):
    """The exporter error `text` said where it stopped and why, in one
    line, or "" for the exporter's own first line: torch.export's
    data-dependent guard names the model's line (an experts loop over the
    experts the routing hit, whose count only the data gives), and the
    dynamo exporter's complex-valued dispatch failure (torch.polar's
    rotary tables) is one no translation can fix: custom_translation_table
    registers real-valued translations only."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if "GuardOnDataDependentSymNode" in text or \
            "Could not guard on data-dependent" in text:
        at = next((i for i, ln in enumerate(lines)
                   if ln.startswith("The following call raised this error")),
                  None)
        if at is not None and at + 2 < len(lines):
            where = re.search(r'File "[^"]*/([^/"]+)", line (\d+)',
                              lines[at + 1])
            if where:
                loop = ("; the model's experts have no "
                        "experts_implementation switch to batched_mm"
                        if "expert" in lines[at + 2] else "")
                return (f"a data-dependent guard at {where[1]}:{where[2]} "
                        f"`{lines[at + 2]}` (a count only the data gives"
                        f"{loop})")
    if "No decompositions registered for the complex-valued input" in text:
        op = re.search(r"op='([^']+)'", text)
        return (f"no ONNX function for complex {op[1] if op else 'input'} "
                "(torch.polar's complex tensors; ONNX has none, and "
                "custom_translation_table takes real-valued translations "
                "only)")
    return ""
