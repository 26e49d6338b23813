"""The emitter of ``rp.trace``: a captured fx graph written as rp text.

``_Emitter`` classifies the graph's nodes (values folded at trace time,
parameters, buffers, inputs), splits them into the prefix, the layers and
the suffix (``rp.layer`` bodies, ``_Region``), and lowers each ATen node
through its handler in ``_HANDLERS`` (``rp._aten`` and the other
``rp._aten_*`` modules, ``rp._conv``, ``rp._moe``, ``rp._segments``).
``rp.trace`` (trace.py) captures the graph, runs the emitter and writes
the files."""

from __future__ import annotations

import operator
from typing import Any, Dict, List, Optional, Tuple

from rp import (_aten, _aten_complex, _aten_compose, _aten_extra,
                _aten_index, _aten_linalg, _aten_movement, _aten_pad,
                _aten_reduce, _conv, _moe, _segments)
from rp._capture import _READS_VALUE, _describe
from rp._irtext import (_RANDOM, _UNSUPPORTED, TraceError, _dense, _elem,
                        _flatten, _fmt_scalar, _ident, _innermost, _np,
                        _opname, _qualname, _short_args, _ttype)


def _is_splat(value) -> bool:
    """Whether every element of ``value`` is its first (NaNs alike)."""
    import torch
    flat = value.detach().reshape(-1)
    first = flat[:1]
    return bool(((flat == first) | (torch.isnan(flat) & torch.isnan(first))
                 ).all()) if flat.dtype.is_floating_point else \
        bool((flat == first).all())


# Every ATen op rp.trace maps, by overload packet name.
_HANDLERS = {**_aten.HANDLERS, **_aten_movement.HANDLERS,
             **_aten_extra.HANDLERS,
             **_aten_compose.HANDLERS, **_aten_pad.HANDLERS, **_conv.HANDLERS,
             **_aten_index.HANDLERS, **_aten_complex.HANDLERS,
             **_aten_reduce.HANDLERS, **_aten_linalg.HANDLERS,
             **_moe.HANDLERS, **_segments.HANDLERS}

# Constants folded at trace time are written as rp.constant text up to this
# many elements, so that the IR stays small.
_MAX_CONSTANT_ELEMENTS = 65536
# Larger ones (rotary tables at long sequences: sequence x head_dim) go to
# the weights file as frozen params, up to this many elements; more is an
# S x S mask (eager attention), which the runtime must never hold.
_MAX_FOLDED_ELEMENTS = 1 << 26


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
                 input_nodes, layer_paths, loose=False):
        self.module = module
        self.gm = gm
        self.values = values
        self.param_nodes = param_nodes      # node -> param name
        self.buffer_nodes = buffer_nodes    # node -> buffer name
        self.input_nodes = input_nodes      # node -> input name
        self.layer_paths = layer_paths
        # Layers found by rp (not given): they may run more than once, and
        # ops between them join the next run (segments()).
        self.loose = loose
        self.run_names: List[str] = list(layer_paths)
        self.counter = 0
        self.types: Dict[str, str] = {}
        self.region: Optional[_Region] = None
        # Constant nodes too large for text, in first-use order: frozen
        # params "<node>:folded" in the weights file.
        self.large_consts: List[Any] = []
        self.const_nodes = set()
        # find_stops(): values with a gradient, and where it stops.
        self.trained = set()
        self.stops = set()

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
                if name in _READS_VALUE:
                    # Python code read a tensor's value (.item(), bool());
                    # the trace holds the branch that value took, which is
                    # right only when the value is fixed at trace time (or
                    # the read is an assert's, which held: rp._capture's
                    # _in_assert, no op of the graph reads its value).
                    if not all(d in self.const_nodes for d in deps) and \
                            not (n.meta.get("rp_assert") and not n.users):
                        raise TraceError(
                            f"rp.trace: {self.where(n)} reads the value of a "
                            f"tensor computed from the inputs or parameters "
                            f"({_qualname(n)}: .item(), bool() or int() of a "
                            f"tensor); rp traces one static graph, so control "
                            f"flow cannot depend on data",
                            op=_qualname(n), module_path=_innermost(n))
                    self.const_nodes.add(n)
                    continue
                if name in value_free or all(d in self.const_nodes for d in deps):
                    v = self.values.get(n)
                    if isinstance(v, torch.Tensor) or (
                            isinstance(v, (tuple, list)) and
                            all(isinstance(x, torch.Tensor) for x in v)):
                        self.const_nodes.add(n)

    def find_stops(self):
        """Finds where the gradient stops as in PyTorch: ``trained`` (the
        float values computed from trainable parameters, .detach() ending
        it) and ``stops``, the values computed from the parameters under
        torch.no_grad() that an op with gradients reads (HRM's early
        recurrent cycles). lower() puts an rp.stop_gradient after each
        stop and each .detach() of a trained value."""
        trained = {n for n in self.param_nodes
                   if getattr(self.values.get(n), "requires_grad", True)}
        for n in self.gm.graph.nodes:
            if n.op != "call_function" or n in self.const_nodes:
                continue
            # Only a float value carries a gradient (a mask does not).
            if not any(a in trained for a in n.all_input_nodes) or \
                    not self._is_float(n) or _opname(n) == "detach":
                continue
            trained.add(n)
            if n.meta.get("rp_grad", True) or _scales_by_one(n):
                continue
            user = next((u for u in n.users
                         if u.meta.get("rp_grad", True) and
                         (u.op != "call_function" or self._is_float(u))),
                        None)
            if user is None:
                continue
            if n.meta.get("rp_inplace") and n.args and \
                    n.args[0] in self.param_nodes:
                # PyTorch's gradient is then the rewritten parameter's:
                # stopping it would give the parameter none.
                raise TraceError(
                    f"rp.trace: {self.where(n)} computes {_qualname(n)} "
                    f"under torch.no_grad() in place into the parameter "
                    f"'{self.param_nodes[n.args[0]]}', and {_qualname(user)} "
                    f"in {self.where(user)} reads it with gradients on: "
                    f"PyTorch then trains the rewritten parameter, which rp "
                    f"cannot express; rewrite the parameter before tracing",
                    op=_qualname(n), module_path=_innermost(n))
            self.stops.add(n)
        self.trained = trained

    def stop_gradient(self, ssa: str) -> str:
        ty = self.ty(ssa)
        return self.emit(f"rp.stop_gradient {ssa} : {ty}", ty)

    def _is_float(self, n) -> bool:
        v = self.values.get(n)
        return any(getattr(x, "is_floating_point", lambda: False)()
                   for x in (v if isinstance(v, (tuple, list)) else (v,)))

    def where(self, n) -> str:
        stack = n.meta.get("rp_stack", ())
        return _describe(stack[-1] if stack else "", self.module)

    def segments(self):
        """Assigns every computed node a segment: 0 prefix, 1..R the layers'
        runs, R+1 suffix, and sets ``run_names`` (the R layers' names).
        Given layers (``loose`` off) must each run once, in order, covering
        every op between the first and the last: TraceError otherwise. The
        layers rp finds itself (``loose``) may run again (a looped block, as
        Dory's recurrent layers; each run is an rp.layer sharing the
        weights, named ``path#2`` from its second run on), and ops between
        two runs (a norm, a per-layer input's select) join the next run."""
        index = {p: i for i, p in enumerate(self.layer_paths)}
        nodes = [n for n in self.gm.graph.nodes
                 if n.op == "call_function" and n not in self.const_nodes]
        run_of: Dict[Any, Any] = {}  # node -> (layer path, call number)
        for n in nodes:
            if n.target is operator.getitem:
                continue
            stack = n.meta.get("rp_stack", ())
            calls = n.meta.get("rp_calls", (1,) * len(stack))
            for p, c in zip(stack, calls):
                if p in index:
                    run_of[n] = (p, c if self.loose else 1)
                    break
        ran = {p for p, _ in run_of.values()}
        for p in self.layer_paths:
            if p not in ran:
                raise TraceError(
                    f"rp.trace: layer '{p}' computes nothing when the module "
                    f"runs; the layers do not cover the module")
        # The runs in the order they start.
        runs: Dict[Any, int] = {}
        for n in nodes:
            if n in run_of and run_of[n] not in runs:
                runs[run_of[n]] = len(runs) + 1
        seen: Dict[str, int] = {}
        self.run_names = []
        for p, _ in runs:
            seen[p] = seen.get(p, 0) + 1
            self.run_names.append(p if seen[p] == 1 else f"{p}#{seen[p]}")
        if not self.loose:
            runs = {k: index[k[0]] + 1 for k in runs}
        layered = [i for i, n in enumerate(nodes) if n in run_of]
        first = layered[0] if layered else len(nodes)
        last = layered[-1] if layered else -1
        nruns = len(self.run_names)
        seg, current, pending = {}, 0, []
        for i, n in enumerate(nodes):
            if n.target is operator.getitem:
                if n.args[0] in seg:
                    seg[n] = seg[n.args[0]]
                elif n.args[0] in pending:
                    pending.append(n)
                else:
                    seg[n] = current
                continue
            if n in run_of:
                s = runs[run_of[n]]
                if s < current:
                    name = (self.run_names[s - 1] if self.loose
                            else self.layer_paths[s - 1])
                    prev = (self.run_names[current - 1] if self.loose
                            else self.layer_paths[current - 1])
                    raise TraceError(
                        f"rp.trace: layer '{name}' runs after layer "
                        f"'{prev}'; list the layers in the order they run, "
                        f"each running once")
                current = s
                for m in pending:  # the ops between two runs
                    seg[m] = s
                pending = []
                seg[n] = s
            elif i < first:
                seg[n] = 0
            elif i > last:
                seg[n] = nruns + 1
            elif self.loose:
                pending.append(n)
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
        r = self.region
        if key is not None and key in r.consts:
            return r.consts[key]
        ty = _ttype(value.shape, value.dtype)
        # A splat (a zero recurrent state of a gated delta net) is one
        # number in the IR text at any size.
        if value.numel() > _MAX_CONSTANT_ELEMENTS and not _is_splat(value):
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

    def is_large(self, n) -> bool:
        """Whether the constant node ``n`` is too large for IR text: it
        becomes a frozen parameter in the weights file (rotary tables at
        long sequences), passed into the layers that read it."""
        import torch
        v = self.values.get(n)
        if not isinstance(v, torch.Tensor) or \
                v.numel() <= _MAX_CONSTANT_ELEMENTS or _is_splat(v):
            return False
        if v.numel() > _MAX_FOLDED_ELEMENTS:
            raise TraceError(
                f"rp.trace: a constant of {v.numel()} elements (shape "
                f"{list(v.shape)}) is computed from buffers in "
                f"{self.where(n)}, more than the {_MAX_FOLDED_ELEMENTS} rp "
                f"folds at trace time; an attention mask of sequence x "
                f"sequence is one: trace the model with "
                f"attn_implementation=\"sdpa\" (the causal mask then stays "
                f"a flag), or with fewer tokens",
                op=_qualname(n), module_path=_innermost(n))
        return True

    def scalar(self, x, dtype) -> str:
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
            if a in self.const_nodes and not self.is_large(a):
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

        nseg = len(self.run_names) + 2
        by_seg: List[List[Any]] = [[] for _ in range(nseg)]
        for n in nodes:
            if len(n.users) == 0 and not n.meta.get("rp_inplace"):
                continue
            by_seg[seg[n]].append(n)

        names = (["prefix"] + list(self.run_names) + ["suffix"]
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
            for a in r.args:
                if a not in top and a in self.const_nodes:
                    top[a] = f"%f{len(self.large_consts)}"
                    self.large_consts.append(a)
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
            if n in self.stops and isinstance(item, str):
                item = self.stop_gradient(item)
            r.local[n] = item
            return
        name = _opname(n)
        handler = _HANDLERS.get(name)
        if handler is None:
            hint = ""
            if name in _RANDOM:
                hint = ("; rp has no random ops (dropout is traced in training "
                        "mode and must have p = 0)")
                if name not in ("bernoulli", "bernoulli_", "native_dropout"):
                    # A router's sampling or jitter (PhiMoE's
                    # sparsemixer) runs in training mode only.
                    hint = ("; rp has no random ops: rp.trace traces "
                            "training mode, where this module draws random "
                            "numbers (a router's sampling or jitter noise); "
                            "rp cannot train it (a module left in eval mode, "
                            "model.eval(), is traced in eval mode when its "
                            "training mode draws random numbers)")
            elif name in ("copy", "copy_", "slice_scatter"):
                hint = ("; rp maps a write through slices and selects "
                        "(x[:, t] = h, x[..., :n].copy_(y)) into a tensor "
                        "the model computed and reads only after the "
                        "write; this one writes elsewhere (an input, a "
                        "parameter, a view read again): build the tensor "
                        "with torch.cat instead")
            raise TraceError(
                f"rp.trace: unsupported op {_qualname(n)} in {self.where(n)}"
                + hint,
                op=_qualname(n), module_path=_innermost(n))
        try:
            out = handler(self, n)
        except TraceError:
            raise
        except Exception as exc:  # a form the handler did not foresee
            raise TraceError(
                f"rp.trace: unsupported form of {_qualname(n)} in "
                f"{self.where(n)} (arguments {_short_args(n)}): the mapping "
                f"failed with {type(exc).__name__}: {exc}; rewrite the op in "
                f"the module (or report it with this message)",
                op=_qualname(n), module_path=_innermost(n)) from exc
        if out is _UNSUPPORTED:
            raise TraceError(
                f"rp.trace: unsupported form of {_qualname(n)} in {self.where(n)}"
                f" (arguments {_short_args(n)})",
                op=_qualname(n), module_path=_innermost(n))
        if n in self.stops:
            if not isinstance(out, str):
                raise TraceError(
                    f"rp.trace: {self.where(n)} computes {_qualname(n)} "
                    f"under torch.no_grad() and an op with gradients reads "
                    f"one of its several results; rp stops a gradient only "
                    f"after an op of one result: run that part with "
                    f"gradients on, or freeze the parameters it reads",
                    op=_qualname(n), module_path=_innermost(n))
            out = self.stop_gradient(out)
        r.local[n] = out

    def out_type(self, n) -> str:
        v = self.values[n]
        return _ttype(v.shape, v.dtype)


def _scales_by_one(n) -> bool:
    """A multiplication or division by the number 1 under torch.no_grad()
    (RWKV's inference rescaling of its first blocks' weights, in place, by
    2 ** (block // rescale_every)) leaves the value and its gradient as they
    are, so stopping the gradient there changes nothing."""
    name = getattr(getattr(n.target, "overloadpacket", None), "__name__", "")
    return (name.rstrip("_") in ("mul", "div") and len(n.args) == 2 and
            isinstance(n.args[1], (int, float)) and
            not isinstance(n.args[1], bool) and n.args[1] == 1)
