"""The text of rp IR that ``rp.trace`` writes, and what every part of the
tracer shares: the error type, MLIR types and constants of torch tensors,
and the names of fx nodes used in messages."""

from __future__ import annotations

import math
from typing import Optional


class TraceError(ValueError):
    """The module cannot be traced into rp: an unsupported op (``op``, and
    ``module_path`` where it ran) or layers that do not cover the module."""

    def __init__(self, message: str, op: Optional[str] = None,
                 module_path: Optional[str] = None):
        self.op = op
        self.module_path = module_path
        super().__init__(message)


# ---------------------------------------------------------------------------
# Types and constants
# ---------------------------------------------------------------------------

def _elem(dtype) -> str:
    import torch
    table = {torch.float32: "f32", torch.float16: "f16",
             torch.bfloat16: "bf16", torch.int64: "i64", torch.int32: "i32",
             torch.bool: "i1"}
    if dtype not in table:
        raise TraceError(f"rp.trace: tensors of type {dtype} are not supported")
    return table[dtype]


def _ttype(shape, dtype) -> str:
    dims = "".join(f"{d}x" for d in shape)
    return f"tensor<{dims}{_elem(dtype)}>"


def _fmt_float(x: float, elem: str) -> str:
    if math.isfinite(x):
        return "%.9e" % x
    bits = {"f32": (0x7F800000, 0xFF800000, 0x7FC00000),
            "f16": (0x7C00, 0xFC00, 0x7E00),
            "bf16": (0x7F80, 0xFF80, 0x7FC0)}[elem]
    if math.isnan(x):
        return hex(bits[2])
    return hex(bits[0] if x > 0 else bits[1])


def _fmt_scalar(x, elem: str) -> str:
    if elem == "i1":
        return "true" if bool(x) else "false"
    if elem.startswith("i"):
        return str(int(x))
    return _fmt_float(float(x), elem)


def _dense(arr, elem: str) -> str:
    import numpy as np
    flat = arr.reshape(-1)
    if flat.size > 0 and (np.all(flat == flat[0]) or
                          (elem[0] in "fb" and np.all(np.isnan(flat)))):
        return f"dense<{_fmt_scalar(flat[0], elem)}>"

    def nest(a):
        if a.ndim == 0:
            return _fmt_scalar(a.item(), elem)
        return "[" + ", ".join(nest(x) for x in a) + "]"
    return f"dense<{nest(arr)}>"


def _np(t):
    import torch
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return t.float().numpy()
    return t.numpy()


_UNSUPPORTED = object()
_RANDOM = {"bernoulli", "rand", "randn", "randint", "native_dropout",
           "rand_like", "randn_like", "randint_like", "normal", "uniform",
           "randperm", "multinomial", "exponential", "exponential_",
           "uniform_", "normal_", "bernoulli_"}


def _opname(n) -> str:
    t = n.target
    if hasattr(t, "overloadpacket"):
        name = t.overloadpacket.__name__
        if n.meta.get("rp_inplace") and name.endswith("_"):
            name = name[:-1]
        return name
    return getattr(t, "__name__", str(t))


def _qualname(n) -> str:
    t = n.target
    if hasattr(t, "overloadpacket"):
        return str(t)  # aten.cumsum.default
    return getattr(t, "__name__", str(t))


def _innermost(n) -> str:
    stack = n.meta.get("rp_stack", ())
    return stack[-1] if stack else ""


def _short_args(n) -> str:
    import torch
    def f(a):
        if isinstance(a, torch.fx.Node):
            return "tensor"
        return repr(a)
    return "(" + ", ".join(f(a) for a in n.args) + ")"


def _flatten(x) -> list:
    if isinstance(x, (list, tuple)):
        out = []
        for y in x:
            out += _flatten(y)
        return out
    if isinstance(x, dict):
        out = []
        for y in x.values():
            out += _flatten(y)
        return out
    return [x]


def _ident(name: str) -> str:
    s = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return s if s and not s[0].isdigit() else "_" + s


def _dim(d: int, rank: int) -> int:
    return d + rank if d < 0 else d
