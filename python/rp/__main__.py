"""The rp flow from the shell (``python -m rp COMMAND ...``):

  trace    MODEL --input NAME=FILE.npy ... -o DIR   rp.trace: DIR/model.mlir
  compile  SRC [-o PLAN] [--devices N] ...          rp.compile (rp-compile)
  train    PLAN [--input NAME=FILE.npy] [--labels FILE.npy] [--steps N]
           [--plot LOSS.png] ...                    rp.train (rp-run)
  data     SRC --tokenizer MODEL_DIR -o FILE.rpds --seq-len N
                                                    rp.data: a dataset file
  finetune MODEL_DIR --data FILE.jsonl --out OUT [--steps N|--epochs E]
           [--eval-data F] [--lora-rank R] [--config F.yaml] ...
                                                    rp.finetune
  export   RUN --hf DIR | --peft DIR | --merged DIR  rp.export
  viz      TRACE.json -o TIMELINE.svg|.png ...      python -m rp.viz
  plot     loss LOG... -o OUT | timeline TRACE -o OUT   rp.plot
  TOOL     ARGS...                                  runs rp-TOOL (opt,
           import, translate, run, ...) found as rp finds it

compile and train pass flags they do not define to rp-compile and rp-run
as written (``--stages=fwd:1;bwd:3,1``, ``--dump-grads=g.safetensors``).
Every command exits 0 on success and 1 on a user error, with the message
on stderr; a tool's failure shows its own diagnostics and exit code.
"""

import argparse
import os
import sys
from pathlib import Path

from rp.tools import ToolError, ToolNotFoundError, find_tool

COMMANDS = ("trace", "compile", "train", "viz", "plot", "data", "finetune",
            "export")


class UsageError(Exception):
    """A bad argument of a command; the message says what to give."""


def _named_files(items, what):
    out = {}
    for item in items or []:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise UsageError(f"{what} '{item}' is not NAME=FILE.npy")
        out[name] = path
    return out


def _load_model(spec):
    """``FILE.py:NAME`` or ``package.module:NAME``; NAME is an nn.Module or
    a callable returning one (called with no arguments)."""
    import importlib
    import importlib.util
    where, sep, name = spec.rpartition(":")
    if not sep or not where or not name:
        raise UsageError(f"model '{spec}' is not FILE.py:NAME or "
                         f"package.module:NAME")
    if where.endswith(".py"):
        path = Path(where)
        if not path.is_file():
            raise UsageError(f"model file '{where}' does not exist")
        sys.path.insert(0, str(path.resolve().parent))
        mod_spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(mod_spec)
        mod_spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as err:
            raise UsageError(f"cannot import '{where}': {err}") from err
    if not hasattr(module, name):
        raise UsageError(f"'{where}' has no '{name}'")
    obj = getattr(module, name)
    import torch.nn as nn
    if not isinstance(obj, nn.Module) and callable(obj):
        obj = obj()
    if not isinstance(obj, nn.Module):
        raise UsageError(f"'{spec}' is {type(obj).__name__}, not a "
                         f"torch.nn.Module or a function returning one")
    return obj


def cmd_trace(argv):
    p = argparse.ArgumentParser(
        prog="python -m rp trace",
        description="Traces a torch.nn.Module into the rp graph "
        "(rp.trace): writes DIR/model.mlir and DIR/weights.safetensors and "
        "prints the path of model.mlir.")
    p.add_argument("model", help="FILE.py:NAME or package.module:NAME; NAME "
                   "is an nn.Module or a function returning one")
    p.add_argument("--input", action="append", metavar="NAME=FILE.npy",
                   required=True, help="an example input of forward, in "
                   "order (repeat); dimension 0 is one microbatch")
    p.add_argument("-o", "--output", required=True, metavar="DIR")
    p.add_argument("--layers", help="comma-separated module paths of the "
                   "layers (default: the repeated children)")
    p.add_argument("--seed", type=int, default=0,
                   help="torch.manual_seed before the model is made")
    args = p.parse_args(argv)
    import numpy as np
    import torch
    from rp.trace import TraceError, trace
    torch.manual_seed(args.seed)
    model = _load_model(args.model)
    inputs = []
    for name, path in _named_files(args.input, "--input").items():
        try:
            inputs.append(torch.from_numpy(np.load(path)))
        except (OSError, ValueError) as err:
            raise UsageError(f"cannot read input '{name}' from '{path}': "
                             f"{err}") from err
    layers = args.layers.split(",") if args.layers else None
    try:
        src = trace(model, tuple(inputs), args.output, layers=layers)
    except TraceError as err:
        raise UsageError(str(err).removeprefix("rp.trace: ")) from err
    print(src)
    return 0


def cmd_compile(argv):
    p = argparse.ArgumentParser(
        prog="python -m rp compile",
        description="Compiles a traced .mlir or an .onnx into a plan "
        "(rp.compile, running rp-compile) and prints the plan's path; "
        "rp-compile's summary goes to stderr. Other rp-compile flags are "
        "passed as written.")
    p.add_argument("src")
    p.add_argument("-o", "--output", help="the plan (default: SRC with the "
                   "suffix .rpplan)")
    p.add_argument("--devices", type=int, default=1)
    p.add_argument("--microbatches", type=int)
    p.add_argument("--hw", default="host")
    p.add_argument("--schedule", default="round-robin")
    args, extra = p.parse_known_args(argv)
    from rp.driver import compile
    import rp.driver
    plan = compile(args.src, args.output, args.devices, args.microbatches,
                   args.hw, args.schedule, extra_args=extra)
    sys.stderr.write(rp.driver.last_compile_summary)
    print(plan)
    return 0


def cmd_train(argv):
    p = argparse.ArgumentParser(
        prog="python -m rp train",
        description="Trains a plan with rp-run (rp.train) and prints "
        "'step K loss V' per step as rp-run does; --plot draws the loss "
        "curve. Other rp-run flags are passed as written.")
    p.add_argument("plan")
    p.add_argument("--input", action="append", metavar="NAME=FILE.npy",
                   help="one global batch of input NAME (repeat)")
    p.add_argument("--labels", metavar="FILE.npy")
    p.add_argument("--steps", type=int, default=1)
    p.add_argument("--lr", type=float,
                   help="default rp-run's 1e-3, or a --resume checkpoint's")
    p.add_argument("--optimizer", default="adamw")
    p.add_argument("--sync", action="store_true",
                   help="synchronous optimizer (default: async, one step "
                   "stale)")
    p.add_argument("--plot", metavar="FILE", help="write the loss curve "
                   "(.png, .svg, .pdf)")
    args, extra = p.parse_known_args(argv)
    from rp.driver import train_steps
    inputs = _named_files(args.input, "--input")
    steps, losses = [], []
    for k, loss in train_steps(args.plan, inputs, args.labels, args.steps,
                               args.lr, args.optimizer, args.sync,
                               extra_args=extra, progress=True):
        print(f"step {k} loss {loss:.9g}", flush=True)
        steps.append(k)
        losses.append(loss)
    if args.plot:
        from rp import plot
        plot.loss_curve(losses, args.plot)
        print(f"rp train: {args.plot}: {len(losses)} losses", file=sys.stderr)
    return 0


def cmd_plot(argv):
    p = argparse.ArgumentParser(
        prog="python -m rp plot",
        description="Plots with matplotlib (rp.plot): 'loss' draws the "
        "losses of rp-run logs (their 'step K loss V' lines), one line per "
        "log; 'timeline' draws an rp-run --trace file.")
    sub = p.add_subparsers(dest="what", required=True)
    lp = sub.add_parser("loss", help="loss curves from rp-run logs")
    lp.add_argument("logs", nargs="+")
    lp.add_argument("-o", "--output", required=True)
    lp.add_argument("--title")
    tp = sub.add_parser("timeline", help="a trace as a timeline")
    tp.add_argument("trace")
    tp.add_argument("-o", "--output", required=True)
    tp.add_argument("--step", type=int)
    tp.add_argument("--plan", help="rp-run PLAN --describe=json output")
    args = p.parse_args(argv)
    from rp import plot
    try:
        if args.what == "loss":
            names = [Path(log).name for log in args.logs]
            if len(set(names)) < len(names):  # one curve per log given
                names = [f"{i}: {n}" for i, n in enumerate(names)]
            runs = (args.logs[0] if len(args.logs) == 1 else
                    dict(zip(names, args.logs)))
            fig = plot.loss_curve(runs, args.output, args.title)
            points = sum(len(line.get_xdata()) for line in fig.axes[0].lines)
            print(f"rp plot: {args.output}: {len(fig.axes[0].lines)} "
                  f"curves, {points} points", file=sys.stderr)
        else:
            fig = plot.timeline(args.trace, args.output, args.step, args.plan)
            spans = [r for r in fig.axes[0].patches if r.get_gid() == "span"]
            print(f"rp plot: {args.output}: {len(spans)} spans",
                  file=sys.stderr)
    except plot.PlotError as err:
        raise UsageError(str(err).removeprefix("rp.plot: ")) from err
    return 0


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print("usage: python -m rp COMMAND [ARGS...]\n\n" + __doc__.strip(),
              file=sys.stdout if len(argv) >= 2 else sys.stderr)
        return 1 if len(argv) < 2 else 0
    command, rest = argv[1], argv[2:]
    if command not in COMMANDS:
        name = command if command.startswith("rp-") else "rp-" + command
        try:
            tool = find_tool(name)
        except ToolNotFoundError as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        os.execv(str(tool), [str(tool), *rest])
    if command == "viz":
        from rp import viz
        return viz.main(rest)
    from rp import _cli_finetune as ft
    handler = {"trace": cmd_trace, "compile": cmd_compile,
               "train": cmd_train, "plot": cmd_plot, "data": ft.cmd_data,
               "finetune": ft.cmd_finetune, "export": ft.cmd_export}[command]
    try:
        return handler(rest)
    except UsageError as err:
        print(f"rp {command}: error: {err}", file=sys.stderr)
        return 1
    except ToolError as err:
        sys.stderr.write(err.stderr)
        return err.returncode
    except ToolNotFoundError as err:
        print(f"rp {command}: error: {err}", file=sys.stderr)
        return 1
    except (ValueError, OSError) as err:
        if command not in ("data", "finetune", "export"):
            raise
        print(f"rp {command}: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
