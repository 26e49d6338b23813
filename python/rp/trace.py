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
  whose children repeat and all run (or the module paths given as
  ``layers``); ops before the first layer form ``prefix``, ops after the
  last ``suffix``. A layer found this way may run again (each run its own
  rp.layer, ``path#2`` from the second on, sharing the weights) and ops
  between two runs join the next; given layers must each run once and
  cover the ops between them. The grad mode each op ran in is recorded: a
  parameter-derived value computed under ``torch.no_grad()`` that an op
  with gradients reads, and ``x.detach()``, are followed by an
  ``rp.stop_gradient`` (the gradient stops there as in PyTorch); an
  in-place write into a parameter under ``torch.no_grad()`` that an op
  with gradients then reads is refused.
* Values that do not depend on the inputs or the parameters (buffers,
  ``arange``, masks, ``torch.full`` ...) are folded at trace time into
  ``rp.constant`` ops, copied into each layer that uses them; one of more
  than 65536 elements (a rotary table at a long sequence) is a frozen
  ``rp.param "<node>:folded"`` in the weights file instead.
* Mixture-of-experts blocks (a router linear and a ModuleList of gated-MLP
  experts, found by structure) trace as one op each and become the rp.moe
  ops (``rp._moe``).
* Each ATen op maps to rp ops (the handlers in ``rp._aten``, the other
  ``rp._aten_*`` modules and ``rp._conv``, lowered by ``rp._emitter``); an
  ATen op without a mapping is an error naming the op and the module path.
  The result goes through ``rp-opt --rp-prepare``, the importers' clean-up
  and fusion pipeline (canonicalize, CSE, layer norm / GELU / attention
  fusion, graph verification).

Weights: ``weights.safetensors`` holds every parameter by name; the IR
points into it (``at "weights.safetensors"[offset]``, the offset of the
tensor's bytes inside the file), so the same file serves rp and PyTorch.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple, Union

from rp import _moe
from rp._capture import (_capture, _default_layers, _inplace_to_functional,
                         _values, _write_safetensors)
# _HANDLERS: the ATen op -> handler table the emitter lowers through (a test
# swaps one entry in it through this module).
from rp._emitter import _HANDLERS, _Emitter
from rp._irtext import _RANDOM, TraceError, _flatten, _ttype
from rp.tools import run_tool

PathLike = Union[str, os.PathLike]

SUPPORTED_OPS = sorted(f"aten.{k}" for k in _HANDLERS)

# The importers' cleanups, spelled once in C++ (rp-prepare): canonicalize,
# CSE, the fusions, layer grouping (a no-op here: the layers are traced)
# and graph verification. No weights option: the constants folded at trace
# time are capped (rp._emitter), so none is moved out of the text.
_OPT_PASSES = ["--rp-prepare"]
# Random ops that are dropout's (its p must be 0, in any mode).
_DROPOUT = {"bernoulli", "bernoulli_", "native_dropout"}


# ---------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------

def _lower(module, inputs, input_names, params, buffers, aliases, layers,
           layer_paths, eval_types):
    """Captures the module (the modules of ``eval_types`` in eval mode
    where the caller left them so) and writes its IR text."""
    # Mixture-of-experts blocks trace as one op each (rp._moe).
    with _moe.patched(module):
        gm = _capture(module, inputs, params, buffers, aliases, eval_types)
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

    if layer_paths is None:
        ran = {p for n in gm.graph.nodes
               for p in n.meta.get("rp_stack", ())}
        layer_paths = _default_layers(module, ran)

    e = _Emitter(module, gm, values, param_nodes, buffer_nodes, input_nodes,
                 layer_paths, loose=layers is None)
    e.classify()
    e.find_stops()
    seg = e.segments()
    output_node = next(n for n in gm.graph.nodes if n.op == "output")
    nouts = len(_flatten(output_node.args[0]))
    out_names = ["output"] if nouts == 1 else [f"output_{i}" for i in range(nouts)]
    header, body, params_used, _ = e.write(input_names, seg, out_names)
    return header, body, params_used, gm, values, e, param_nodes


def _random_in_training(module, err):
    """The class of the module ``err`` refuses for drawing random numbers
    (PhiMoE's router samples its experts in training mode), where the
    caller left that module in eval mode: rp.trace traces training mode,
    and such a module is traced again in the mode its caller chose, which
    PyTorch's own step from the same model runs (deterministic). None
    otherwise (a module in training mode stays refused: its step is
    random)."""
    if err.op is None or err.module_path is None:
        return None
    name = err.op.split(".")[1] if err.op.count(".") >= 2 else err.op
    if name not in _RANDOM or name in _DROPOUT:
        return None
    try:
        sub = module.get_submodule(err.module_path)
    except AttributeError:
        return None
    return None if sub.training else type(sub)


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
        layer_paths = None  # found once the trace says which modules ran
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

    eval_types: Tuple[type, ...] = ()
    while True:
        try:
            header, body, params_used, gm, values, e, param_nodes = _lower(
                module, inputs, input_names, params, buffers, aliases,
                layers, layer_paths, eval_types)
            break
        except TraceError as err:
            again = _random_in_training(module, err)
            if again is None or again in eval_types:
                raise
            eval_types += (again,)

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    trainable = {name: t.requires_grad for name, t in params}
    weights = [(param_nodes[n], values[n]) for n in params_used]
    folded = [(f"{n.name}:folded", values[n].contiguous())
              for n in e.large_consts]
    offsets = _write_safetensors(out_dir / "weights.safetensors",
                                 weights + folded)
    decls = []
    for i, n in enumerate(params_used):
        name = param_nodes[n]
        v = values[n]
        flag = " trainable" if trainable[name] else ""
        decls.append(f'    %p{i} = rp.param "{name}"{flag} at '
                     f'"weights.safetensors"[{offsets[name]}] : '
                     f'{_ttype(v.shape, v.dtype)}')
    for i, (name, v) in enumerate(folded):
        decls.append(f'    %f{i} = rp.param "{name}" at '
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


# `rp.trace` is this function once the package is imported, so the list of
# mapped ops hangs on it too.
trace.SUPPORTED_OPS = SUPPORTED_OPS
