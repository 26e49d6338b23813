"""What rp.trace does before writing IR: capturing the module and its layers.

``_capture`` runs the module under ``make_fx`` with its parameters and
buffers as graph inputs, tagging every node with the module paths running;
``_values`` evaluates the captured graph; ``_inplace_to_functional`` rewires
in-place ATen ops; ``_default_layers`` picks the repeated children that
become rp.layer ops; ``_write_safetensors`` writes the weights file the IR
points into. Split out of ``rp.trace`` (which holds the IR emission and the
public ``trace`` function) to keep each file to one job.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, Dict, List, Tuple

from rp import safetensors
from rp._irtext import TraceError, _elem, _opname

# ATen ops through which Python code reads a tensor's value.
_READS_VALUE = {"_local_scalar_dense", "item", "is_nonzero"}
_OWN_DIRS = (str(Path(__file__).resolve().parent),)

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
    entries = []
    for name, t in tensors:
        raw, st = _raw_bytes(t)
        entries.append((name, st, t.shape, raw))
    return safetensors.write_raw(path, entries,
                                 {"format": "pt", "writer": "rp.trace"})


# ---------------------------------------------------------------------------
# Layers
# ---------------------------------------------------------------------------

def _default_layers(module, ran=None) -> List[str]:
    """The children of the outermost nn.Sequential / nn.ModuleList whose
    children repeat (at least two, all of one class), breadth first; given
    ``ran`` (the module paths that computed something), the first such list
    whose children all ran (a multimodal causal LM's vision or audio tower
    comes first and never runs on text)."""
    import torch.nn as nn
    queue = [("", module)]
    while queue:
        path, mod = queue.pop(0)
        children = list(mod.named_children())
        if (isinstance(mod, (nn.Sequential, nn.ModuleList)) and
                len(children) >= 2 and
                len({type(c) for _, c in children}) == 1):
            found = [f"{path}.{n}" if path else n for n, _ in children]
            if ran is None or all(p in ran for p in found):
                return found
            continue
        queue += [(f"{path}.{n}" if path else n, c) for n, c in children]
    return []


def _describe(path: str, module) -> str:
    if path == "":
        return f"the top module ({type(module).__name__})"
    return f"module '{path}' ({type(module.get_submodule(path)).__name__})"


# ---------------------------------------------------------------------------
# Tracing
# ---------------------------------------------------------------------------

def _check_outputs(out, module) -> None:
    """Refuses outputs that are not tensors (make_fx would fail with
    "argument of type ..."), saying how to leave out a KV cache, the usual
    one: transformers' models return theirs unless use_cache is off."""
    import torch
    stack = [out]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            stack.extend(x.values())
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
        elif not (x is None or isinstance(x, (torch.Tensor, int, float, bool))):
            kind = type(x).__name__
            cache = "Cache" in kind or hasattr(x, "get_seq_length")
            raise TraceError(
                f"rp.trace: {type(module).__name__} returns a {kind}"
                + (" (its KV cache, for generation)" if cache else "")
                + " beside its tensors; rp traces tensors only"
                + ("; trace it with the cache off: model.config.use_cache = "
                   "False, or a wrapper returning model(input_ids, use_cache="
                   "False).logits (python -m rp finetune MODEL_DIR does this)"
                   if cache else "; return tensors (or lists, tuples and "
                   "dicts of them)"))


def _in_assert() -> bool:
    """Whether the Python code now reading a tensor's value (the first
    frame outside torch and rp) is an ``assert`` statement's line: XLM's
    ``assert lengths.max().item() <= slen`` of lengths computed from the
    tokens. An assert that held while tracing leaves the graph as it is
    (the trace goes on past it either way), so the emitter lets it pass
    where it refuses any other read of a value computed from the data; as
    torch.export and the TorchScript exporter, rp does not check it again
    when it runs."""
    import linecache
    import sys

    import torch
    skip = _OWN_DIRS + (str(Path(torch.__file__).resolve().parent),)
    frame = sys._getframe(1)
    while frame is not None and \
            str(Path(frame.f_code.co_filename).resolve()).startswith(skip):
        frame = frame.f_back
    if frame is None:
        return False
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
    return line.lstrip().startswith("assert ")


def _capture(module, inputs, params, buffers, aliases, eval_types=()):
    """make_fx of the module with parameters and buffers as graph inputs,
    in training mode but for the modules of ``eval_types`` the caller left
    in eval mode (rp.trace's _random_in_training); every node's
    meta["rp_stack"] is the tuple of module paths running and
    meta["rp_calls"] the matching tuple of call numbers (a module run
    twice, as a looped layer, tells its runs apart by them)."""
    import torch
    from torch.fx.experimental import proxy_tensor
    try:  # torch 2; torch.nn.utils.stateless's is deprecated there
        from torch.func import functional_call
    except ImportError:  # torch 1.13
        from torch.nn.utils.stateless import functional_call

    stack: List[str] = []
    calls: List[int] = []
    counts: Dict[int, int] = {}
    paths = {}
    for name, sub in module.named_modules():
        paths.setdefault(id(sub), name)

    base = proxy_tensor.PythonKeyTracer

    class Tracer(base):
        def create_node(self, *args, **kwargs):
            node = super().create_node(*args, **kwargs)
            node.meta["rp_stack"] = tuple(stack)
            node.meta["rp_calls"] = tuple(calls)
            # Under torch.no_grad() PyTorch gives the op no gradient; the
            # emitter stops it there (or refuses). A custom
            # autograd.Function's forward runs with gradients off, yet its
            # backward gives one: its ops count as called (Bloom's GELU).
            node.meta["rp_grad"] = torch.is_grad_enabled() or \
                bool(fn_grad and fn_grad[-1])
            if _opname(node) in _READS_VALUE:
                node.meta["rp_assert"] = _in_assert()
            return node

    # Whether gradients were on where each custom autograd.Function now
    # running was applied.
    fn_grad: List[bool] = []
    Function = torch.autograd.Function
    own_apply = Function.__dict__.get("apply")  # torch 1.13: inherited
    apply_desc = next(k.__dict__["apply"] for k in Function.__mro__
                      if "apply" in k.__dict__)

    def apply(cls, *args, **kwargs):
        fn_grad.append(torch.is_grad_enabled())
        try:
            return apply_desc.__get__(None, cls)(*args, **kwargs)
        finally:
            fn_grad.pop()

    def pre(mod, _inp):
        stack.append(paths.get(id(mod), "?"))
        counts[id(mod)] = counts.get(id(mod), 0) + 1
        calls.append(counts[id(mod)])

    def post(mod, _inp, _out):
        stack.pop()
        calls.pop()

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
        out = functional_call(module, state, tuple(xs))
        _check_outputs(out, module)
        return out

    # Each module's own mode is put back afterwards, not the top module's
    # on all of them (module.train(was)): a wrapper left in training mode
    # around an eval-mode model would leave the model in training mode,
    # and a later torch.export of it would run Gemma 3n's training-only
    # clamp of its AltUp weights' .data (an export then refuses "a fake
    # tensor in the exported program constant's list").
    modes = [(m, m.training) for m in module.modules()]
    module.train()
    for m, was in modes:
        if isinstance(m, tuple(eval_types)) and not was:
            m.train(False)
    # torch 2 refuses .item() on traced tensors; modules read constant
    # masks that way (TransformerEncoder checks whether its mask is causal),
    # so values are read and Emitter.classify refuses the reads of values
    # that depend on the inputs or parameters (torch 1.13 reads them all).
    options = {}
    if "_error_on_data_dependent_ops" in \
            inspect.signature(proxy_tensor.make_fx).parameters:
        options["_error_on_data_dependent_ops"] = False
    proxy_tensor.PythonKeyTracer = Tracer
    Function.apply = classmethod(apply)
    try:
        gm = proxy_tensor.make_fx(f, **options)(
            [p for _, p in params], [b for _, b in buffers], *inputs)
    except RuntimeError as err:
        if "get value out of a tracing tensor" not in str(err):
            raise
        # torch 1.13: any read; the hooks' stack says where it happened.
        path = stack[-1] if stack else ""
        raise TraceError(
            f"rp.trace: {_describe(path, module)} reads the value of a tensor "
            f"while tracing (.item(), bool() or int() of a tensor); rp traces "
            f"one static graph, so control flow cannot depend on tensor "
            f"values", module_path=path) from err
    finally:
        proxy_tensor.PythonKeyTracer = base
        if own_apply is not None:
            Function.apply = own_apply
        else:
            del Function.apply
        for h in handles:
            h.remove()
        for m, was in modes:
            m.training = was
    return gm


def _values(gm, flat_args):
    """Runs the traced graph and returns every node's value. An in-place
    op (``_inplace_to_functional``) runs on a copy of the tensor it writes:
    that tensor's value stays what the ops before read, as rp's functional
    form computes it (Llama 4's router scatters its scores into a
    ``full_like`` of -inf, a constant that must stay -inf)."""
    import torch.fx

    values = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            if n.meta.get("rp_inplace") and n.op == "call_function":
                args, kwargs = self.fetch_args_kwargs_from_env(n)
                if args and isinstance(args[0], torch.Tensor):
                    v = n.target(args[0].clone(), *args[1:], **kwargs)
                    values[n] = v
                    return v
            v = super().run_node(n)
            values[n] = v
            return v

    import torch
    with torch.no_grad():
        Recorder(gm, garbage_collect_values=False).run(*flat_args)
    return values


def _rp_slice_scatter(base, src, dim, start, end, select=False):
    """``base`` with ``src`` (broadcast) written over ``base[start:end]``
    along ``dim``: what ``base[..., start:end].copy_(src)`` leaves (with
    ``select``, ``base.select(dim, start).copy_(src)``)."""
    import torch
    if select:
        src = src.to(base.dtype).expand_as(base.select(dim, start)) \
            .unsqueeze(dim)
    size = base.shape[dim]
    start = 0 if start is None else (start + size if start < 0 else start)
    end = size if end is None else min(end + size if end < 0 else end, size)
    part = base.narrow(dim, start, end - start)
    # A concat, as the handler writes it (torch 1's slice_scatter takes
    # only one-wide slices).
    return torch.cat([base.narrow(dim, 0, start),
                      src.to(base.dtype).expand_as(part),
                      base.narrow(dim, end, size - end)], dim)


_END = 2 ** 63 - 1  # ATen's end of a slice written `:`
# Ops whose result may share storage with an input: a write into their
# result would reach that input too, so it is not a base rp rewrites.
_ALIASING = {"slice", "select", "view", "_unsafe_view", "_reshape_alias",
             "reshape", "transpose", "t", "permute", "expand", "expand_as",
             "alias", "unsqueeze", "squeeze", "as_strided", "diagonal",
             "narrow", "unfold", "split", "split_with_sizes", "unbind",
             "chunk", "detach", "contiguous", "view_as", "flatten",
             "unflatten", "movedim", "view_as_real", "view_as_complex",
             "real", "imag"}


def _view_step(view):
    """(dim, start, end, select) of a slice (step 1) or select view,
    else None."""
    import torch
    target = getattr(view, "target", None)
    if target is torch.ops.aten.select.int:
        if not isinstance(view.args[2], int):
            return None
        i = view.args[2]
        return view.args[1], i, None if i == -1 else i + 1, True
    if target is torch.ops.aten.slice.Tensor and \
            (len(view.args) < 5 or view.args[4] == 1):
        args = list(view.args[1:4]) + [None] * (4 - len(view.args))
        return args[0] if args[0] is not None else 0, args[1], args[2], False
    return None


def _write_base(graph_node):
    """Whether a write into ``graph_node`` reaches nothing else: a tensor
    an op computed (not a view of another, not an input or parameter)."""
    import torch
    if graph_node.op != "call_function" or \
            not isinstance(graph_node.target, torch._ops.OpOverload):
        return graph_node.target is _rp_slice_scatter
    return graph_node.target.overloadpacket.__name__ not in _ALIASING


def _view_writes_to_functional(graph):
    """``base[..., a:b].copy_(src)``, ``base[:, t].copy_(src)`` and chains
    of such slices and selects (``attn[..., i, :i] = row``, the gated delta
    rule's forward substitution; DeepSeek's MLA key assembly; the
    recurrences that write one step at a time): later uses of ``base``
    read the write's functional form, one ``_rp_slice_scatter`` per view
    of the chain from the innermost out, each into the view below it as it
    was before the write. Only when ``base`` is a tensor an op computed
    (a write into a view of another tensor, an input or a parameter would
    reach that one too) and nothing but the chain reads its views."""
    import torch
    order = {n: i for i, n in enumerate(graph.nodes)}
    for n in list(graph.nodes):
        if n.op != "call_function" or n.target is not \
                torch.ops.aten.copy_.default:
            continue
        chain, cur = [], n.args[0]
        while _view_step(cur) is not None:
            chain.append(cur)
            cur = cur.args[0]
        # torch 1 writes x[:, t] as a select of a whole-range slice of x.
        chain = [v for v in chain
                 if not (_view_step(v)[1:] in ((None, None, False),
                                               (0, None, False),
                                               (0, _END, False)) and
                         len(v.users) == 1 and v is not n.args[0])]
        if not chain or not _write_base(cur) or any(
                len(v.users) != 1 for v in chain[1:]) or \
                (len(chain) > 1 or _view_step(chain[0])[3]) and \
                len(chain[0].users) != 1:
            continue
        base = cur
        # chain[0] is the view written, chain[-1] the view of base. Each
        # level: the view below (as read before the write) with the level
        # above written into it.
        value, anchor = n.args[1], n
        for i, view in enumerate(chain):
            below = chain[i + 1] if i + 1 < len(chain) else base
            dim, start, end, select = _view_step(view)
            with graph.inserting_after(anchor):
                value = graph.call_function(
                    _rp_slice_scatter, (below, value, dim, start, end, select))
            value.meta.update(n.meta)
            anchor = value
        new = value
        for user in list(base.users):
            if user not in chain and user is not n and \
                    order.get(user, -1) > order[n]:
                user.replace_input_with(base, new)
        order = {m: i for i, m in enumerate(graph.nodes)}
        if not n.users:
            graph.erase_node(n)


def _inplace_to_functional(graph):
    """``x.add_(y)``: later uses of ``x`` read the op's result, and the op is
    then handled as its functional form (views of ``x`` taken before it are
    not updated: such code is rare in models and refused by torch.fx too)."""
    _view_writes_to_functional(graph)
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
