"""Tracing a ``torch.nn.Module`` into the rp graph form.

``rp.trace(module, example_inputs, out_dir)`` writes ``out_dir/model.mlir``
(the form ``rp-import`` produces: one ``func.func @main``, ``rp.param`` per
weight, an ordered list of ``rp.layer`` ops) and ``out_dir/weights.safetensors``.

How it works (torch 1.13's ``make_fx``, ATen level):

* The module runs once under ``make_fx`` with its parameters and buffers
  passed in through ``functional_call``, so every weight is a graph input
  with a name (its module path; a tied weight is one parameter).
* ``make_fx`` does not record module paths, so forward hooks keep a stack
  of the modules running and every recorded node is tagged with it. Layers
  are the children of the outermost ``nn.Sequential``/``nn.ModuleList``
  whose children repeat (or the module paths given as ``layers``); ops
  before the first layer form ``prefix``, ops after the last ``suffix``.
* Values that do not depend on the inputs or the parameters (buffers,
  ``arange``, masks, ``torch.full`` ...) are folded at trace time into
  ``rp.constant`` ops, copied into each layer that uses them.
* Each ATen op maps to rp ops; an ATen op without a mapping is an error
  naming the op and the module path. The result goes through ``rp-opt``
  with the importer's clean-up and fusion passes (canonicalize, CSE, layer
  norm / GELU / attention fusion) and ``--rp-verify-graph``.

Weights: ``weights.safetensors`` holds every parameter by name; the IR
points into it (``at "weights.safetensors"[offset]``, the offset of the
tensor's bytes inside the file), so the same file serves rp and PyTorch.
"""

from __future__ import annotations

import inspect
import json
import math
import operator
import os
import struct
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from rp.tools import run_tool

PathLike = Union[str, os.PathLike]

# Constants folded at trace time above this many elements become frozen
# parameters in the weights file instead of rp.constant text.
_MAX_CONSTANT_ELEMENTS = 65536

_OPT_PASSES = [
    "--canonicalize", "--cse", "--rp-fuse-layer-norm", "--rp-fuse-rms-norm",
    "--rp-fuse-gelu", "--rp-fuse-silu", "--rp-fuse-attention",
    "--canonicalize", "--cse", "--rp-verify-graph",
]


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


# ---------------------------------------------------------------------------
# Weights
# ---------------------------------------------------------------------------

_ST_DTYPE = {"f32": ("F32", "<f4"), "f16": ("F16", "<f2"),
             "i64": ("I64", "<i8"), "i32": ("I32", "<i4"), "i1": ("BOOL", "u1")}


def _raw_bytes(t) -> Tuple[bytes, str]:
    import torch
    t = t.detach().contiguous().cpu()
    elem = _elem(t.dtype)
    if elem == "bf16":
        raw = t.view(torch.int16).numpy().astype("<i2").tobytes()
        return raw, "BF16"
    st, np_dtype = _ST_DTYPE[elem]
    return t.numpy().astype(np_dtype).tobytes(), st


def _write_safetensors(path: Path, tensors: List[Tuple[str, Any]]) -> Dict[str, int]:
    """Writes ``tensors`` (name, torch tensor) as safetensors and returns the
    file offset of each tensor's bytes."""
    header: Dict[str, Any] = {"__metadata__": {"format": "pt",
                                               "writer": "rp.trace"}}
    blobs = []
    pos = 0
    for name, t in tensors:
        raw, st = _raw_bytes(t)
        header[name] = {"dtype": st, "shape": list(t.shape),
                        "data_offsets": [pos, pos + len(raw)]}
        blobs.append(raw)
        pos += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(len(text) + 8) % 8)  # data starts 8-byte aligned
    base = 8 + len(text)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)
    os.replace(tmp, path)
    return {name: base + header[name]["data_offsets"][0] for name, _ in tensors}


# ---------------------------------------------------------------------------
# Layers
# ---------------------------------------------------------------------------

def _default_layers(module) -> List[str]:
    """The children of the outermost nn.Sequential / nn.ModuleList whose
    children repeat (at least two, all of one class), breadth first."""
    import torch.nn as nn
    queue = [("", module)]
    while queue:
        path, mod = queue.pop(0)
        children = list(mod.named_children())
        if (isinstance(mod, (nn.Sequential, nn.ModuleList)) and
                len(children) >= 2 and
                len({type(c) for _, c in children}) == 1):
            return [f"{path}.{n}" if path else n for n, _ in children]
        queue += [(f"{path}.{n}" if path else n, c) for n, c in children]
    return []


def _describe(path: str, module) -> str:
    if path == "":
        return f"the top module ({type(module).__name__})"
    return f"module '{path}' ({type(module.get_submodule(path)).__name__})"


# ---------------------------------------------------------------------------
# Tracing
# ---------------------------------------------------------------------------

def _capture(module, inputs, params, buffers, aliases):
    """make_fx of the module with parameters and buffers as graph inputs;
    every node's meta["rp_stack"] is the tuple of module paths running."""
    import torch
    from torch.fx.experimental import proxy_tensor
    from torch.nn.utils.stateless import functional_call

    stack: List[str] = []
    paths = {}
    for name, sub in module.named_modules():
        paths.setdefault(id(sub), name)

    base = proxy_tensor.PythonKeyTracer

    class Tracer(base):
        def create_node(self, *args, **kwargs):
            node = super().create_node(*args, **kwargs)
            node.meta["rp_stack"] = tuple(stack)
            return node

    def pre(mod, _inp):
        stack.append(paths.get(id(mod), "?"))

    def post(mod, _inp, _out):
        stack.pop()

    handles = []
    for sub in module.modules():
        handles.append(sub.register_forward_pre_hook(pre))
        handles.append(sub.register_forward_hook(post))

    pnames = [n for n, _ in params]
    bnames = [n for n, _ in buffers]

    def f(plist, blist, *xs):
        state = dict(zip(pnames, plist))
        state.update(zip(bnames, blist))
        for alias, canon in aliases.items():
            state[alias] = state[canon]
        return functional_call(module, state, tuple(xs))

    was_training = module.training
    module.train()
    proxy_tensor.PythonKeyTracer = Tracer
    try:
        gm = proxy_tensor.make_fx(f)([p for _, p in params],
                                     [b for _, b in buffers], *inputs)
    finally:
        proxy_tensor.PythonKeyTracer = base
        for h in handles:
            h.remove()
        module.train(was_training)
    return gm


def _values(gm, flat_args):
    """Runs the traced graph and returns every node's value."""
    import torch.fx

    values = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            v = super().run_node(n)
            values[n] = v
            return v

    import torch
    with torch.no_grad():
        Recorder(gm, garbage_collect_values=False).run(*flat_args)
    return values


def _inplace_to_functional(graph):
    """``x.add_(y)``: later uses of ``x`` read the op's result, and the op is
    then handled as its functional form (views of ``x`` taken before it are
    not updated: such code is rare in models and refused by torch.fx too)."""
    order = {n: i for i, n in enumerate(graph.nodes)}
    for n in list(graph.nodes):
        if n.op != "call_function" or not hasattr(n.target, "overloadpacket"):
            continue
        name = n.target.overloadpacket.__name__
        if not name.endswith("_") or name.startswith("_"):
            continue
        if not n.args or not hasattr(n.args[0], "users"):
            continue
        target = n.args[0]
        for user in list(target.users):
            if user is not n and order[user] > order[n]:
                user.replace_input_with(target, n)
        n.meta["rp_inplace"] = True


# ---------------------------------------------------------------------------
# Emission
# ---------------------------------------------------------------------------

class _Region:
    """The body of one rp.layer being written."""

    def __init__(self, emitter, name: str):
        self.emitter = emitter
        self.name = name
        self.lines: List[str] = []
        self.local: Dict[Any, Any] = {}   # node -> ssa name (or a tuple)
        self.args: List[Any] = []          # external nodes, in first-use order
        self.arg_names: Dict[Any, str] = {}
        self.consts: Dict[Any, str] = {}

    def fresh(self) -> str:
        return self.emitter.fresh()


class _Emitter:
    def __init__(self, module, gm, values, param_nodes, buffer_nodes,
                 input_nodes, layer_paths):
        self.module = module
        self.gm = gm
        self.values = values
        self.param_nodes = param_nodes      # node -> param name
        self.buffer_nodes = buffer_nodes    # node -> buffer name
        self.input_nodes = input_nodes      # node -> input name
        self.layer_paths = layer_paths
        self.counter = 0
        self.types: Dict[str, str] = {}
        self.region: Optional[_Region] = None
        self.large_consts: List[Tuple[str, Any]] = []
        self.const_nodes = set()

    def fresh(self) -> str:
        self.counter += 1
        return f"%v{self.counter}"

    # -- classification ---------------------------------------------------

    def classify(self):
        import torch
        value_free = {"new_zeros", "new_ones", "new_full", "new_empty",
                      "zeros_like", "ones_like", "full_like", "empty_like"}
        for n in self.gm.graph.nodes:
            if n.op == "get_attr" or n in self.buffer_nodes:
                self.const_nodes.add(n)
            elif n.op == "call_function":
                name = _opname(n)
                if name in _RANDOM:
                    continue
                deps = [a for a in n.all_input_nodes]
                if name in value_free or all(d in self.const_nodes for d in deps):
                    v = self.values.get(n)
                    if isinstance(v, torch.Tensor) or (
                            isinstance(v, (tuple, list)) and
                            all(isinstance(x, torch.Tensor) for x in v)):
                        self.const_nodes.add(n)

    def where(self, n) -> str:
        stack = n.meta.get("rp_stack", ())
        return _describe(stack[-1] if stack else "", self.module)

    def segments(self):
        """Assigns every computed node a segment: 0 prefix, 1..L layers,
        L+1 suffix. Raises TraceError on ops between layers."""
        index = {p: i for i, p in enumerate(self.layer_paths)}
        nodes = [n for n in self.gm.graph.nodes
                 if n.op == "call_function" and n not in self.const_nodes]
        seg = {}
        for n in nodes:
            if n.target is operator.getitem:
                continue
            for p in n.meta.get("rp_stack", ()):
                if p in index:
                    seg[n] = index[p] + 1
                    break
        ran = set(seg.values())
        for p, i in index.items():
            if i + 1 not in ran:
                raise TraceError(
                    f"rp.trace: layer '{p}' computes nothing when the module "
                    f"runs; the layers do not cover the module")
        layered = [i for i, n in enumerate(nodes) if n in seg]
        first = layered[0] if layered else len(nodes)
        last = layered[-1] if layered else -1
        nlayers = len(self.layer_paths)
        current = 0
        for i, n in enumerate(nodes):
            if n.target is operator.getitem:
                seg[n] = seg.get(n.args[0], current)
                continue
            if n in seg:
                if seg[n] < current:
                    raise TraceError(
                        f"rp.trace: layer '{self.layer_paths[seg[n] - 1]}' "
                        f"runs after layer '{self.layer_paths[current - 1]}'; "
                        f"list the layers in the order they run, each "
                        f"running once")
                current = seg[n]
            elif i < first:
                seg[n] = 0
            elif i > last:
                seg[n] = nlayers + 1
            else:
                raise TraceError(
                    f"rp.trace: the layers do not cover the module: "
                    f"{_qualname(n)} in {self.where(n)} runs between layer "
                    f"'{self.layer_paths[current - 1]}' and the next one; "
                    f"list a layer that contains it",
                    op=_qualname(n), module_path=_innermost(n))
        return seg

    # -- operands -----------------------------------------------------------

    def ty(self, ssa: str) -> str:
        return self.types[ssa]

    def emit(self, text: str, ty: str, ssa: Optional[str] = None) -> str:
        ssa = ssa or self.fresh()
        self.region.lines.append(f"{ssa} = {text}")
        self.types[ssa] = ty
        return ssa

    def constant(self, value, key=None) -> str:
        """An rp.constant of the tensor ``value`` in the current region."""
        import torch
        r = self.region
        if key is not None and key in r.consts:
            return r.consts[key]
        ty = _ttype(value.shape, value.dtype)
        if value.numel() > _MAX_CONSTANT_ELEMENTS:
            raise TraceError(
                f"rp.trace: a constant of {value.numel()} elements "
                f"(shape {list(value.shape)}) is computed from buffers in "
                f"{r.name}; constants hold at most {_MAX_CONSTANT_ELEMENTS}")
        arr = _np(value)
        ssa = self.emit(f"rp.constant {_dense(arr, _elem(value.dtype))} : {ty}",
                        ty)
        if key is not None:
            r.consts[key] = ssa
        return ssa

    def scalar(self, x, dtype) -> str:
        import torch
        key = ("scalar", repr(x), str(dtype))
        r = self.region
        if key in r.consts:
            return r.consts[key]
        ty = _ttype((), dtype)
        ssa = self.emit(f"rp.constant dense<{_fmt_scalar(x, _elem(dtype))}> : {ty}", ty)
        r.consts[key] = ssa
        return ssa

    def val(self, a, dtype=None) -> str:
        """The ssa value of argument ``a`` (a node or a Python scalar) in the
        current region, cast to ``dtype`` when given and different."""
        import torch
        r = self.region
        if isinstance(a, torch.fx.Node):
            if a in self.const_nodes:
                v = self.values[a]
                ssa = self.constant(v, key=a)
            elif a in r.local:
                ssa = r.local[a]
            else:
                if a not in r.arg_names:
                    r.args.append(a)
                    r.arg_names[a] = self.fresh()
                    v = self.values[a]
                    self.types[r.arg_names[a]] = _ttype(v.shape, v.dtype)
                ssa = r.arg_names[a]
            if dtype is not None and self.dtype_of(a) != dtype:
                src = self.ty(ssa)
                shape = self.values[a].shape
                dst = _ttype(shape, dtype)
                ssa = self.emit(f"rp.cast {ssa} : {src} to {dst}", dst)
            return ssa
        if isinstance(a, (bool, int, float)):
            return self.scalar(a, dtype if dtype is not None else
                               (torch.float32 if isinstance(a, float) else torch.int64))
        raise TraceError(f"rp.trace: unsupported operand {a!r}")

    def dtype_of(self, a):
        return self.values[a].dtype

    # -- writing --------------------------------------------------------------

    def write(self, input_names, seg, out_names) -> Tuple[str, List[Tuple[str, Any]]]:
        """Returns the module text and the tensors for the weights file."""
        import torch
        graph = self.gm.graph
        nodes = [n for n in graph.nodes
                 if n.op == "call_function" and n not in self.const_nodes]
        output = next(n for n in graph.nodes if n.op == "output")
        results = torch.fx.node.map_arg(output.args[0], lambda x: x)
        flat_out = _flatten(results)
        for o in flat_out:
            if not isinstance(o, torch.fx.Node):
                raise TraceError("rp.trace: the module's outputs must be tensors")

        nseg = len(self.layer_paths) + 2
        by_seg: List[List[Any]] = [[] for _ in range(nseg)]
        for n in nodes:
            if len(n.users) == 0 and not n.meta.get("rp_inplace"):
                continue
            by_seg[seg[n]].append(n)

        names = (["prefix"] + list(self.layer_paths) + ["suffix"]
                 if self.layer_paths else ["prefix", "model", "suffix"])
        if not self.layer_paths:
            # One layer holds everything.
            for n in nodes:
                seg[n] = 1
            by_seg = [[], [n for s in by_seg for n in s], []]

        # Which segment reads which node.
        consumers: Dict[Any, set] = {}
        for s, ns in enumerate(by_seg):
            for n in ns:
                for a in n.all_input_nodes:
                    consumers.setdefault(a, set()).add(s)

        lines: List[str] = []
        top: Dict[Any, str] = {}  # node -> ssa in the function body
        arg_decls = []
        for node, name in self.input_nodes.items():
            ssa = f"%{_ident(name)}"
            top[node] = ssa
            v = self.values[node]
            arg_decls.append(f'{ssa}: {_ttype(v.shape, v.dtype)} {{rp.name = "{name}"}}')

        params_used = [n for n in self.param_nodes if len(n.users) > 0]
        for i, n in enumerate(params_used):
            top[n] = f"%p{i}"

        out_types = []
        for o in flat_out:
            v = self.values[o]
            out_types.append(_ttype(v.shape, v.dtype))

        for s, ns in enumerate(by_seg):
            if not ns:
                continue
            self.region = _Region(self, names[s])
            for n in ns:
                self.lower(n)
            r = self.region
            res = [n for n in ns
                   if any(c > s for c in consumers.get(n, ())) or n in flat_out]
            res_ssa = [self.val(n) for n in res]
            res_types = [self.ty(x) for x in res_ssa]
            operands = [top[a] if a in top else None for a in r.args]
            for a, o in zip(r.args, operands):
                if o is None:
                    raise TraceError(f"rp.trace: internal error: {a} has no value "
                                     f"outside layer {names[s]}")
            arg_types = [self.ty(r.arg_names[a]) for a in r.args]
            ssa_res = [self.fresh() for _ in res]
            lhs = ", ".join(ssa_res)
            fty = (f"({', '.join(arg_types)}) -> "
                   f"{res_types[0] if len(res_types) == 1 else '(' + ', '.join(res_types) + ')'}")
            lines.append(f'    {lhs} = rp.layer "{names[s]}"({", ".join(operands)}) : {fty} {{')
            bb = ", ".join(f"{r.arg_names[a]}: {t}" for a, t in zip(r.args, arg_types))
            lines.append(f"    ^bb0({bb}):")
            lines += ["      " + x for x in r.lines]
            lines.append(f"      rp.yield {', '.join(res_ssa)} : {', '.join(res_types)}")
            lines.append("    }")
            for n, x, t in zip(res, ssa_res, res_types):
                top[n] = x
                self.types[x] = t

        ret = []
        for o in flat_out:
            if o not in top:
                raise TraceError("rp.trace: an output of the module is computed "
                                 "from constants or returns an input unchanged")
            ret.append(top[o])
        # Parameters are declared first; the file offsets are filled in by
        # the caller, which writes the weights.
        self.region = None
        header = [f"func.func @main({', '.join(arg_decls)}) -> ("
                  + ", ".join(f'{t} {{rp.name = "{nm}"}}' for t, nm in zip(out_types, out_names))
                  + ") {"]
        body = lines + [f"    return {', '.join(ret)} : {', '.join(out_types)}", "  }"]
        return header, body, params_used, flat_out

    # -- ops ------------------------------------------------------------------

    def lower(self, n):
        import torch
        r = self.region
        if n.target is operator.getitem:
            src, idx = n.args
            packed = r.local.get(src)
            if packed is None:
                raise TraceError(f"rp.trace: internal error: getitem of {src}")
            item = packed[idx]
            if callable(item):
                item = item()
            if item is None:
                raise TraceError(
                    f"rp.trace: unsupported use of result {idx} of "
                    f"{_qualname(src)} in {self.where(n)}",
                    op=_qualname(src), module_path=_innermost(n))
            r.local[n] = item
            return
        name = _opname(n)
        handler = _HANDLERS.get(name)
        if handler is None:
            hint = ""
            if name in _RANDOM:
                hint = ("; rp has no random ops (dropout is traced in training "
                        "mode and must have p = 0)")
            raise TraceError(
                f"rp.trace: unsupported op {_qualname(n)} in {self.where(n)}"
                + hint,
                op=_qualname(n), module_path=_innermost(n))
        out = handler(self, n)
        if out is _UNSUPPORTED:
            raise TraceError(
                f"rp.trace: unsupported form of {_qualname(n)} in {self.where(n)}"
                f" (arguments {_short_args(n)})",
                op=_qualname(n), module_path=_innermost(n))
        r.local[n] = out

    def out_type(self, n) -> str:
        v = self.values[n]
        return _ttype(v.shape, v.dtype)


_UNSUPPORTED = object()
_RANDOM = {"bernoulli", "rand", "randn", "randint", "native_dropout",
           "rand_like", "randn_like", "randint_like", "normal", "uniform",
           "randperm", "multinomial", "exponential"}


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


# Handlers: each returns the ssa of the result (or a tuple for multi-result
# ops, whose items may be thunks), or _UNSUPPORTED.

def _identity(e, n):
    return e.val(n.args[0])


def _binary(kind):
    def h(e, n):
        dt = e.values[n].dtype
        a, b = n.args[0], n.args[1]
        alpha = n.kwargs.get("alpha", n.args[2] if len(n.args) > 2 else 1)
        if kind == "rsub":
            a, b = b, a
        if n.kwargs.get("rounding_mode") is not None:
            return _UNSUPPORTED
        lhs = e.val(a, dt)
        rhs = e.val(b, dt)
        if alpha != 1 and kind in ("add", "sub", "rsub"):
            # torch: a + alpha * b (rsub: other - alpha * self)
            if kind == "rsub":
                lhs = e.emit(f"rp.mul {lhs}, {e.scalar(alpha, dt)} : "
                             f"({e.ty(lhs)}, {_ttype((), dt)}) -> {e.ty(lhs)}", e.ty(lhs))
            else:
                rhs = e.emit(f"rp.mul {rhs}, {e.scalar(alpha, dt)} : "
                             f"({e.ty(rhs)}, {_ttype((), dt)}) -> {e.ty(rhs)}", e.ty(rhs))
        op = {"rsub": "sub", "maximum": "max", "minimum": "min"}.get(kind, kind)
        ty = e.out_type(n)
        return e.emit(f"rp.{op} {lhs}, {rhs} : ({e.ty(lhs)}, {e.ty(rhs)}) -> {ty}", ty)
    return h


def _cmp(pred):
    def h(e, n):
        import torch
        a, b = n.args[0], n.args[1]
        va = e.values[a] if isinstance(a, torch.fx.Node) else a
        vb = e.values[b] if isinstance(b, torch.fx.Node) else b
        dt = torch.result_type(va, vb)
        lhs, rhs = e.val(a, dt), e.val(b, dt)
        ty = e.out_type(n)
        return e.emit(f"rp.cmp {pred}, {lhs}, {rhs} : ({e.ty(lhs)}, {e.ty(rhs)}) -> {ty}", ty)
    return h


def _not(e, n):
    import torch
    if e.values[n].dtype != torch.bool:
        return _UNSUPPORTED
    x = e.val(n.args[0])
    f = e.scalar(False, torch.bool)
    ty = e.out_type(n)
    return e.emit(f"rp.cmp eq, {x}, {f} : ({e.ty(x)}, {e.ty(f)}) -> {ty}", ty)


def _unary(op):
    def h(e, n):
        x = e.val(n.args[0], e.values[n].dtype)
        ty = e.out_type(n)
        return e.emit(f"rp.{op} {x} : {ty}", ty)
    return h


def _gelu(e, n):
    approx = n.kwargs.get("approximate", n.args[1] if len(n.args) > 1 else "none")
    x = e.val(n.args[0])
    ty = e.out_type(n)
    suffix = " approximate = tanh" if approx == "tanh" else ""
    return e.emit(f"rp.gelu {x}{suffix} : {ty}", ty)


def _pow(e, n):
    dt = e.values[n].dtype
    x = e.val(n.args[0], dt)
    p = e.val(n.args[1], dt)
    ty = e.out_type(n)
    return e.emit(f"rp.pow {x}, {p} : ({e.ty(x)}, {e.ty(p)}) -> {ty}", ty)


def _reshape(e, n):
    x = e.val(n.args[0])
    ty = e.out_type(n)
    if e.ty(x) == ty:
        return x
    return e.emit(f"rp.reshape {x} : {e.ty(x)} to {ty}", ty)


def _expand(e, n):
    x = e.val(n.args[0])
    ty = e.out_type(n)
    if e.ty(x) == ty:
        return x
    return e.emit(f"rp.broadcast {x} : {e.ty(x)} to {ty}", ty)


def _permute_to(e, x, perm, ty):
    if list(perm) == sorted(perm):
        return x
    return e.emit(f"rp.transpose {x} permutation = [{', '.join(map(str, perm))}] : "
                  f"{e.ty(x)} -> {ty}", ty)


def _transpose(e, n):
    src = n.args[0]
    rank = e.values[src].dim()
    perm = list(range(rank))
    if _opname(n) == "t":
        if rank < 2:
            return e.val(src)
        perm = [1, 0]
    else:
        a, b = _dim(n.args[1], rank), _dim(n.args[2], rank)
        perm[a], perm[b] = perm[b], perm[a]
    return _permute_to(e, e.val(src), perm, e.out_type(n))


def _permute(e, n):
    src = n.args[0]
    rank = e.values[src].dim()
    perm = [_dim(d, rank) for d in n.args[1]]
    return _permute_to(e, e.val(src), perm, e.out_type(n))


def _slice_text(e, x, offsets, strides, ty):
    return e.emit(f"rp.slice {x} offsets = [{', '.join(map(str, offsets))}] "
                  f"strides = [{', '.join(map(str, strides))}] : {e.ty(x)} -> {ty}", ty)


def _slice(e, n):
    src = n.args[0]
    shape = list(e.values[src].shape)
    rank = len(shape)
    dim = _dim(n.args[1] if len(n.args) > 1 else 0, rank)
    start = n.args[2] if len(n.args) > 2 else None
    step = n.args[4] if len(n.args) > 4 else 1
    start = 0 if start is None else start
    if start < 0:
        start += shape[dim]
    start = max(0, min(start, shape[dim]))
    x = e.val(src)
    ty = e.out_type(n)
    if ty == e.ty(x) and start == 0 and step == 1:
        return x
    offsets = [0] * rank
    strides = [1] * rank
    offsets[dim] = start
    strides[dim] = step
    return _slice_text(e, x, offsets, strides, ty)


def _select(e, n):
    import torch
    src, dim, idx = n.args
    shape = list(e.values[src].shape)
    rank = len(shape)
    dim = _dim(dim, rank)
    idx = idx + shape[dim] if idx < 0 else idx
    x = e.val(src)
    offsets = [0] * rank
    offsets[dim] = idx
    kept = list(shape)
    kept[dim] = 1
    dt = e.values[src].dtype
    s = _slice_text(e, x, offsets, [1] * rank, _ttype(kept, dt))
    ty = e.out_type(n)
    return e.emit(f"rp.reshape {s} : {e.ty(s)} to {ty}", ty)


def _split(e, n):
    src = n.args[0]
    shape = list(e.values[src].shape)
    rank = len(shape)
    dim = _dim(n.args[2] if len(n.args) > 2 else n.kwargs.get("dim", 0), rank)
    outs = e.values[n]
    x = e.val(src)
    dt = e.values[src].dtype
    items = []
    off = 0
    for o in outs:
        size = o.shape[dim]

        def thunk(off=off, o=o):
            offsets = [0] * rank
            offsets[dim] = off
            ty = _ttype(o.shape, dt)
            if ty == e.ty(x):
                return x
            return _slice_text(e, x, offsets, [1] * rank, ty)
        items.append(thunk)
        off += size
    return tuple(items)


def _unbind(e, n):
    src = n.args[0]
    shape = list(e.values[src].shape)
    rank = len(shape)
    dim = _dim(n.args[1] if len(n.args) > 1 else 0, rank)
    x = e.val(src)
    dt = e.values[src].dtype
    items = []
    for i, o in enumerate(e.values[n]):
        def thunk(i=i, o=o):
            offsets = [0] * rank
            offsets[dim] = i
            kept = list(shape)
            kept[dim] = 1
            s = _slice_text(e, x, offsets, [1] * rank, _ttype(kept, dt))
            ty = _ttype(o.shape, dt)
            return e.emit(f"rp.reshape {s} : {e.ty(s)} to {ty}", ty)
        items.append(thunk)
    return tuple(items)


def _cat(e, n):
    tensors = n.args[0]
    dt = e.values[n].dtype
    rank = e.values[n].dim()
    dim = _dim(n.args[1] if len(n.args) > 1 else n.kwargs.get("dim", 0), rank)
    xs = [e.val(t, dt) for t in tensors if e.values[t].numel() > 0]
    ty = e.out_type(n)
    if len(xs) == 1:
        return xs[0]
    return e.emit(f"rp.concat {', '.join(xs)} dim = {dim} : "
                  f"({', '.join(e.ty(x) for x in xs)}) -> {ty}", ty)


def _matmul_text(e, a, b, ty):
    return e.emit(f"rp.matmul {a}, {b} : ({e.ty(a)}, {e.ty(b)}) -> {ty}", ty)


_VIEWS = {"view", "_unsafe_view", "_reshape_alias", "reshape"}
_SAME = {"clone", "alias", "contiguous", "detach"}


def _unflatten(e, node, keep: int):
    """ATen writes a matmul of [A..., M, K] tensors as a view to [prod(A),
    M, K] (through clone / same-shape expand) and a bmm or mm. Returns the
    tensor before that view when it has the same trailing ``keep`` dims and
    leading dims whose product is the flat one, else None."""
    import torch
    shape = list(e.values[node].shape)

    def fits(cand):
        s = list(e.values[cand].shape)
        return (len(s) > len(shape) and
                s[len(s) - keep:] == shape[len(shape) - keep:] and
                math.prod(s[:len(s) - keep]) ==
                math.prod(shape[:len(shape) - keep]))

    cur = node
    seen_view = False
    while isinstance(cur, torch.fx.Node) and cur.op == "call_function" and \
            cur not in e.const_nodes:
        name = _opname(cur)
        src = cur.args[0] if cur.args else None
        if not isinstance(src, torch.fx.Node):
            break
        if name in _SAME or (name == "expand" and
                             list(e.values[src].shape) == list(e.values[cur].shape)):
            cur = src
        elif name in _VIEWS:
            cur = src
            seen_view = True
        else:
            break
        if seen_view and fits(cur):
            return cur
    return None


def _matmul(e, a, b, out_node, bias=None):
    """rp.matmul of nodes ``a`` and ``b`` (plus ``bias``) with ``out_node``'s
    type, on the tensors before ATen's flattening views where possible."""
    ty = e.out_type(out_node)
    out_shape = list(e.values[out_node].shape)
    dt = e.values[out_node].dtype
    va, vb = e.values[a], e.values[b]
    lhs, rhs, full = a, b, None
    if va.dim() == 2 and vb.dim() == 2:
        src = _unflatten(e, a, 1)
        if src is not None:
            lhs = src
            full = list(e.values[src].shape)[:-1] + [out_shape[-1]]
    elif va.dim() == 3 and vb.dim() == 3:
        sa, sb = _unflatten(e, a, 2), _unflatten(e, b, 2)
        if sa is not None and sb is not None and \
                list(e.values[sa].shape)[:-2] == list(e.values[sb].shape)[:-2]:
            lhs, rhs = sa, sb
            full = list(e.values[sa].shape)[:-2] + out_shape[-2:]
    fty = ty if full is None else _ttype(full, dt)
    m = _matmul_text(e, e.val(lhs), e.val(rhs), fty)
    late = None
    if bias is not None:
        # The bias is added before the reshape back to the flat shape when
        # it broadcasts to the unflattened result (a [N] bias, a [1, M, N]
        # attention mask), else after it.
        if full is None or _broadcasts(list(e.values[bias].shape), full):
            bv = e.val(bias, dt)
            m = e.emit(f"rp.add {bv}, {m} : ({e.ty(bv)}, {fty}) -> {fty}", fty)
        else:
            late = bias
    if full is not None:
        m = e.emit(f"rp.reshape {m} : {fty} to {ty}", ty)
    if late is not None:
        bv = e.val(late, dt)
        m = e.emit(f"rp.add {bv}, {m} : ({e.ty(bv)}, {ty}) -> {ty}", ty)
    return m


def _broadcasts(shape, to) -> bool:
    """Whether numpy broadcasting of ``shape`` against ``to`` gives ``to``."""
    if len(shape) > len(to):
        return False
    return all(s in (1, t) for s, t in zip(shape[::-1], to[::-1]))


def _mm(e, n):
    if n.kwargs:
        return _UNSUPPORTED
    if e.values[n.args[0]].dim() < 2 or e.values[n.args[1]].dim() < 2:
        return _UNSUPPORTED
    return _matmul(e, n.args[0], n.args[1], n)


def _addmm(e, n):
    if n.kwargs.get("beta", 1) != 1 or n.kwargs.get("alpha", 1) != 1:
        return _UNSUPPORTED
    bias, a, b = n.args[:3]
    return _matmul(e, a, b, n, bias=bias)


def _baddbmm(e, n):
    """beta * input + alpha * (batch1 @ batch2); MultiheadAttention writes
    its additive attention mask this way (beta = alpha = 1)."""
    if n.kwargs.get("beta", 1) != 1 or n.kwargs.get("alpha", 1) != 1:
        return _UNSUPPORTED
    bias, a, b = n.args[:3]
    if e.values[a].dim() != 3 or e.values[b].dim() != 3:
        return _UNSUPPORTED
    return _matmul(e, a, b, n, bias=bias)


def _convolution(e, n):
    """A convolution whose stride equals its kernel size, with no padding,
    dilation 1 and one group (a patch embedding, as a ViT's conv_proj):
    the image [B, C, S1.., Sk] is cut into patches, [B, P1.., Pk, C*K1..*Kk]
    (reshape, transpose), which an rp.matmul with the [O, C*K1..*Kk]
    weight (transpose_b) plus the bias maps to [B, P1.., Pk, O], then
    transposed to [B, O, P1.., Pk]. Any other convolution is unsupported."""
    x, w, bias, stride, padding, dilation, transposed, _, groups = n.args[:9]
    xs, ws = list(e.values[x].shape), list(e.values[w].shape)
    k = len(ws) - 2
    kernel = ws[2:]
    if (transposed or groups != 1 or len(xs) != k + 2 or k < 1 or
            list(stride) != kernel or any(p != 0 for p in padding) or
            any(d != 1 for d in dilation)):
        return _UNSUPPORTED
    dt = e.values[n].dtype
    b, c, o = xs[0], xs[1], ws[0]
    patches = [s // kk for s, kk in zip(xs[2:], kernel)]
    xv = e.val(x)
    used = [b, c] + [p * kk for p, kk in zip(patches, kernel)]
    if used != xs:  # the trailing rows and columns no patch covers
        xv = _slice_text(e, xv, [0] * len(xs), [1] * len(xs), _ttype(used, dt))
    split = [b, c]
    for p, kk in zip(patches, kernel):
        split += [p, kk]
    xv = _reshape_text(e, xv, _ttype(split, dt))
    # [B, C, P1, K1, .., Pk, Kk] -> [B, P1.., Pk, C, K1.., Kk]
    perm = [0] + [2 + 2 * i for i in range(k)] + [1] + \
        [3 + 2 * i for i in range(k)]
    xv = _permute_to(e, xv, perm,
                     _ttype([split[i] for i in perm], dt))
    flat = math.prod(ws[1:])
    xv = _reshape_text(e, xv, _ttype([b] + patches + [flat], dt))
    wv = _reshape_text(e, e.val(w), _ttype([o, flat], dt))
    mty = _ttype([b] + patches + [o], dt)
    m = e.emit(f"rp.matmul {xv}, {wv} transpose_b : ({e.ty(xv)}, {e.ty(wv)}) "
               f"-> {mty}", mty)
    if bias is not None:
        bv = e.val(bias, dt)
        m = e.emit(f"rp.add {m}, {bv} : ({mty}, {e.ty(bv)}) -> {mty}", mty)
    return _permute_to(e, m, [0, k + 1] + list(range(1, k + 1)), e.out_type(n))


def _reshape_text(e, x, ty):
    if e.ty(x) == ty:
        return x
    return e.emit(f"rp.reshape {x} : {e.ty(x)} to {ty}", ty)


def _embedding(e, n):
    w, idx = n.args[0], n.args[1]
    padding_idx = n.args[2] if len(n.args) > 2 else n.kwargs.get("padding_idx", -1)
    if padding_idx not in (-1, None):
        return _UNSUPPORTED  # its gradient skips the padding row
    if len(n.args) > 4 and n.args[4]:
        return _UNSUPPORTED  # sparse
    wv, iv = e.val(w), e.val(idx)
    ty = e.out_type(n)
    return e.emit(f"rp.gather {wv}[{iv}] axis = 0 : ({e.ty(wv)}, {e.ty(iv)}) -> {ty}", ty)


def _layer_norm(e, n):
    x, shape, w, b, eps = n.args[:5]
    rank = e.values[x].dim()
    axis = rank - len(shape)
    xv = e.val(x)
    ops, tys = [xv], [e.ty(xv)]
    text = f"rp.layer_norm {xv}"
    if w is not None:
        wv = e.val(w)
        text += f" scale({wv})"
        ops.append(wv)
        tys.append(e.ty(wv))
    if b is not None:
        bv = e.val(b)
        text += f" bias({bv})"
        ops.append(bv)
        tys.append(e.ty(bv))
    ty = e.types[xv]
    out = e.emit(f"{text} axis = {axis} epsilon = {'%.17e' % float(eps)} : "
                 f"({', '.join(tys)}) -> {ty}", ty)
    return (out, None, None)


def _softmax(op):
    def h(e, n):
        x, dim = n.args[0], n.args[1]
        if len(n.args) > 2 and n.args[2]:
            return _UNSUPPORTED  # half_to_float
        xv = e.val(x)
        d = _dim(dim, e.values[x].dim())
        ty = e.out_type(n)
        return e.emit(f"rp.{op} {xv} dim = {d} : {ty}", ty)
    return h


def _reduce(kind):
    def h(e, n):
        x = n.args[0]
        rank = e.values[x].dim()
        dims = n.args[1] if len(n.args) > 1 else list(range(rank))
        if isinstance(dims, int):
            dims = [dims]
        if dims is None or len(dims) == 0:
            dims = list(range(rank))
        keep = n.args[2] if len(n.args) > 2 else n.kwargs.get("keepdim", False)
        if n.kwargs.get("dtype") is not None:
            return _UNSUPPORTED
        dims = sorted({_dim(d, rank) for d in dims})
        xv = e.val(x)
        ty = e.out_type(n)
        kd = " keep_dims" if keep else ""
        return e.emit(f"rp.reduce {kind} {xv} dims = [{', '.join(map(str, dims))}]{kd} : "
                      f"{e.ty(xv)} -> {ty}", ty)
    return h


def _masked_fill(e, n):
    x, mask, value = n.args[:3]
    dt = e.values[n].dtype
    xv = e.val(x)
    mv = e.val(mask)
    fv = e.val(value, dt)
    ty = e.out_type(n)
    return e.emit(f"rp.where {mv}, {fv}, {xv} : ({e.ty(mv)}, {e.ty(fv)}, {e.ty(xv)}) -> {ty}", ty)


def _where(e, n):
    c, a, b = n.args[:3]
    dt = e.values[n].dtype
    cv, av, bv = e.val(c), e.val(a, dt), e.val(b, dt)
    ty = e.out_type(n)
    return e.emit(f"rp.where {cv}, {av}, {bv} : ({e.ty(cv)}, {e.ty(av)}, {e.ty(bv)}) -> {ty}", ty)


def _to_copy(e, n):
    x = n.args[0]
    dt = e.values[n].dtype
    xv = e.val(x)
    if e.values[x].dtype == dt:
        return xv
    ty = e.out_type(n)
    return e.emit(f"rp.cast {xv} : {e.ty(xv)} to {ty}", ty)


def _dropout(e, n):
    x, p, train = n.args[:3]
    if p == 0 or not train:
        return (e.val(x), None)
    raise TraceError(
        f"rp.trace: unsupported op {_qualname(n)} (p = {p}) in {e.where(n)}; "
        f"rp has no random ops (dropout is traced in training mode and must "
        f"have p = 0)", op=_qualname(n), module_path=_innermost(n))


_HANDLERS = {
    "add": _binary("add"), "sub": _binary("sub"), "mul": _binary("mul"),
    "div": _binary("div"), "rsub": _binary("rsub"),
    "maximum": _binary("maximum"), "minimum": _binary("minimum"),
    "eq": _cmp("eq"), "ne": _cmp("ne"), "lt": _cmp("lt"), "le": _cmp("le"),
    "gt": _cmp("gt"), "ge": _cmp("ge"),
    "bitwise_not": _not, "logical_not": _not,
    "neg": _unary("neg"), "exp": _unary("exp"), "log": _unary("log"),
    "sqrt": _unary("sqrt"), "rsqrt": _unary("rsqrt"), "tanh": _unary("tanh"),
    "erf": _unary("erf"), "sigmoid": _unary("sigmoid"), "silu": _unary("silu"),
    "relu": _unary("relu"), "gelu": _gelu, "pow": _pow,
    "view": _reshape, "_unsafe_view": _reshape, "_reshape_alias": _reshape,
    "reshape": _reshape, "unsqueeze": _reshape, "squeeze": _reshape,
    "flatten": _reshape, "view_as": _reshape,
    "expand": _expand,
    "clone": _identity, "alias": _identity, "detach": _identity,
    "contiguous": _identity, "lift_fresh_copy": _identity,
    "_to_copy": _to_copy,
    "t": _transpose, "transpose": _transpose, "permute": _permute,
    "slice": _slice, "select": _select, "split": _split,
    "split_with_sizes": _split, "unbind": _unbind, "cat": _cat,
    "mm": _mm, "bmm": _mm, "matmul": _mm, "addmm": _addmm,
    "baddbmm": _baddbmm, "convolution": _convolution,
    "embedding": _embedding, "native_layer_norm": _layer_norm,
    "_softmax": _softmax("softmax"), "_log_softmax": _softmax("log_softmax"),
    "mean": _reduce("mean"), "sum": _reduce("sum"), "amax": _reduce("max"),
    "amin": _reduce("min"),
    "masked_fill": _masked_fill, "where": _where,
    "native_dropout": _dropout,
}

SUPPORTED_OPS = sorted(f"aten.{k}" for k in _HANDLERS)


# ---------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------

def trace(module, example_inputs, out_dir: PathLike,
          layers: Optional[Sequence[str]] = None) -> Path:
    """Traces ``module`` on ``example_inputs`` (a tensor or a tuple of
    tensors; dimension 0 is the batch of one microbatch) and writes
    ``out_dir/model.mlir`` and ``out_dir/weights.safetensors``. Returns the
    path of ``model.mlir``.

    Inputs are named after the parameters of ``module.forward``; parameters
    after their module paths. ``layers`` lists the module paths of the
    layers (default: the children of the outermost repeated
    ``nn.Sequential``/``nn.ModuleList``). Raises TraceError for an op rp has
    no mapping for (naming the ATen op and the module path) and for layers
    that do not cover the module."""
    import torch

    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    inputs = tuple(example_inputs)
    for x in inputs:
        if not isinstance(x, torch.Tensor):
            raise TraceError("rp.trace: example_inputs must be tensors")

    sig = inspect.signature(module.forward)
    pnames = [p.name for p in sig.parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(pnames) < len(inputs):
        raise TraceError(f"rp.trace: {len(inputs)} example inputs but forward "
                         f"takes {len(pnames)} ({', '.join(pnames)})")
    input_names = pnames[:len(inputs)]

    # Parameters and buffers by identity: a tied weight is one parameter,
    # named by its first module path (as named_parameters()).
    params, buffers, aliases = [], [], {}
    seen: Dict[int, str] = {}
    for mpath, sub in module.named_modules(remove_duplicate=False):
        for kind, store in (("p", sub._parameters), ("b", sub._buffers)):
            for pname, t in store.items():
                if t is None:
                    continue
                full = f"{mpath}.{pname}" if mpath else pname
                if id(t) in seen:
                    if seen[id(t)] != full:
                        aliases[full] = seen[id(t)]
                    continue
                seen[id(t)] = full
                (params if kind == "p" else buffers).append((full, t))

    if layers is None:
        layer_paths = _default_layers(module)
    else:
        layer_paths = list(layers)
        known = dict(module.named_modules())
        for p in layer_paths:
            if p not in known or p == "":
                raise TraceError(f"rp.trace: layer '{p}' is not a submodule "
                                 f"of {type(module).__name__}; the layers do "
                                 f"not cover the module")
        for i, p in enumerate(layer_paths):
            for q in layer_paths[i + 1:]:
                if p == q or q.startswith(p + ".") or p.startswith(q + "."):
                    raise TraceError(f"rp.trace: layers '{p}' and '{q}' "
                                     f"overlap")

    gm = _capture(module, inputs, params, buffers, aliases)
    _inplace_to_functional(gm.graph)
    flat = [t for _, t in params] + [t for _, t in buffers] + list(inputs)
    values = _values(gm, flat)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    np_, nb = len(params), len(buffers)
    param_nodes = {n: params[i][0] for i, n in enumerate(placeholders[:np_])}
    buffer_nodes = {n: buffers[i][0]
                    for i, n in enumerate(placeholders[np_:np_ + nb])}
    input_nodes = {n: input_names[i]
                   for i, n in enumerate(placeholders[np_ + nb:])}

    e = _Emitter(module, gm, values, param_nodes, buffer_nodes, input_nodes,
                 layer_paths)
    e.classify()
    seg = e.segments()
    output_node = next(n for n in gm.graph.nodes if n.op == "output")
    nouts = len(_flatten(output_node.args[0]))
    out_names = ["output"] if nouts == 1 else [f"output_{i}" for i in range(nouts)]
    header, body, params_used, _ = e.write(input_names, seg, out_names)

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    trainable = {name: t.requires_grad for name, t in params}
    weights = [(param_nodes[n], values[n]) for n in params_used]
    offsets = _write_safetensors(out_dir / "weights.safetensors", weights)
    decls = []
    for i, n in enumerate(params_used):
        name = param_nodes[n]
        v = values[n]
        flag = " trainable" if trainable[name] else ""
        decls.append(f'    %p{i} = rp.param "{name}"{flag} at '
                     f'"weights.safetensors"[{offsets[name]}] : '
                     f'{_ttype(v.shape, v.dtype)}')
    text = "\n".join(["module {", "  " + header[0]] + decls + body +
                      ["}"]) + "\n"
    raw = out_dir / "model.raw.mlir"
    raw.write_text(text)
    final = out_dir / "model.mlir"
    tmp = out_dir / "model.mlir.tmp"
    run_tool("rp-opt", [str(raw), *_OPT_PASSES, "-o", str(tmp)])
    os.replace(tmp, final)
    raw.unlink()
    return final
