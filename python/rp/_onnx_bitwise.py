"""``|`` and ``&`` of an integer tensor with a bool one, for torch's
TorchScript exporter.

The exporter writes ``aten::__or__``/``__and__`` (and ``bitwise_or``) of
bools only ("ONNX export does NOT support exporting bitwise OR for
non-boolean input values"); ONNX has BitwiseOr/BitwiseAnd only from opset
18. CPM-Ant builds its attention mask as ``context | (bool mask)`` with an
int64 ``context`` and then ``& (span == span)``: PyTorch promotes the bool
to the integer type (0 or 1), and with one side 0 or 1 both are exact in
opset-13 arithmetic, for every integer ``a`` (two's complement, ``a mod 2``
taking the divisor's sign as Python's ``%``):

    a | b = a + b * (1 - a mod 2)        a & b = b * (a mod 2)

Two integer tensors are written as BitwiseOr/BitwiseAnd at opset 18 and up,
and refused below it naming that opset; two bools as Or/And, as the
exporter writes them.
"""

from __future__ import annotations

# ONNX's TensorProto numbers of the integer types torch's result may have.
_ONNX_INT = {"Byte": 2, "Char": 3, "Short": 5, "Int": 6, "Long": 7}


def _kind(value):
    """'bool', 'int' or None (anything else) for an input of the original
    aten node: a tensor by its element type, a Python number by its type."""
    import torch
    t = value.type()
    if isinstance(t, torch._C.TensorType):
        name = t.scalarType()
        return "bool" if name == "Bool" else "int" if name in _ONNX_INT \
            else None
    if isinstance(t, torch._C.BoolType):
        return "bool"
    if isinstance(t, torch._C.IntType):
        return "int"
    return None


def _make(name, op, onnx_op):
    def symbolic(g, a, b):
        from torch.onnx import symbolic_helper
        ia, ib = list(g.original_node.inputs())[:2]
        ka, kb = _kind(ia), _kind(ib)
        out = g.original_node.output().type().scalarType()
        if ka == "bool" and kb == "bool":
            return g.op("Or" if op == "|" else "And", a, b)
        if ka is None or kb is None or out not in _ONNX_INT:
            return symbolic_helper._unimplemented(
                name, f"{op} is defined on integer and bool tensors", a)
        to = _ONNX_INT[out]
        if ka == "int" and kb == "int":
            if g.opset < 18:
                return symbolic_helper._unimplemented(
                    name, f"{op} of two integer tensors needs ONNX's "
                    f"{onnx_op} (opset 18): export with opset_version=18 "
                    "(rp.onnx_symbolics writes an integer with a bool at "
                    "any opset)", a)
            return g.op(onnx_op, g.op("Cast", a, to_i=to),
                        g.op("Cast", b, to_i=to))
        n, bit = (a, b) if kb == "bool" else (b, a)
        n, bit = g.op("Cast", n, to_i=to), g.op("Cast", bit, to_i=to)
        import torch
        two = g.op("CastLike", g.op("Constant", value_t=torch.tensor(2)), n)
        odd = g.op("Mod", n, two, fmod_i=0)
        if op == "&":
            return g.op("Mul", bit, odd)
        one = g.op("CastLike", g.op("Constant", value_t=torch.tensor(1)), n)
        return g.op("Add", n, g.op("Mul", bit, g.op("Sub", one, odd)))

    return symbolic


SYMBOLICS = tuple(
    (name, _make(name, op, onnx_op)) for name, op, onnx_op in (
        ("aten::__or_", "|", "BitwiseOr"),
        ("aten::bitwise_or", "|", "BitwiseOr"),
        ("aten::__and_", "&", "BitwiseAnd"),
        ("aten::bitwise_and", "&", "BitwiseAnd")))
