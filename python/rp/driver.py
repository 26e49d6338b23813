"""``rp.compile`` and ``rp.train``: rp-compile and rp-run from Python.

Keyword options map to the tools' flags of the same name with ``_`` for
``-``: ``True`` is a bare flag, ``False``/``None`` leave it out, a list
repeats it, anything else is ``--flag=value``.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import (Any, Dict, Iterator, List, Mapping, Optional, Sequence,
                    Tuple, Union)

from rp.tools import ToolError, find_tool, run_tool

PathLike = Union[str, os.PathLike]

_STEP = re.compile(r"^step (\d+) loss (\S+)$")


def _flags(options: Mapping[str, Any]) -> List[str]:
    out = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            out.append(flag)
        elif isinstance(value, (list, tuple)):
            out += [f"{flag}={v}" for v in value]
        else:
            out.append(f"{flag}={value}")
    return out


def compile(src: PathLike, out: Optional[PathLike] = None, devices: int = 1,
            microbatches: Optional[int] = None, hw: str = "host",
            schedule: str = "round-robin", *, extra_args: Sequence[str] = (),
            **pipeline_options) -> Path:
    """Compiles ``src`` (a traced or imported ``.mlir``, or an ``.onnx``)
    into a plan with ``rp-compile`` and returns the plan's path (default:
    ``src`` with the suffix ``.rpplan``). Other rp-compile flags are keyword
    options: ``stages="fwd:1;bwd:3,1"``, ``dtype="bf16"``, ``lora_rank=8``,
    ``forward_only=True``, ``quantize_base="nf4"`` (with ``lora_rank``: the
    frozen base stored NF4 or ``"int8"``); ``extra_args`` are flags passed
    as written.
    Raises ToolError with rp-compile's diagnostics.
    The one-paragraph summary rp-compile prints is kept in
    ``rp.driver.last_compile_summary``."""
    global last_compile_summary
    src = Path(src)
    out = Path(out) if out is not None else src.with_suffix(".rpplan")
    out.parent.mkdir(parents=True, exist_ok=True)
    options: Dict[str, Any] = {"devices": devices, "microbatches": microbatches,
                               "hw": hw, "schedule": schedule}
    options.update(pipeline_options)
    proc = run_tool("rp-compile", [str(src), "-o", str(out), *_flags(options),
                                   *extra_args])
    last_compile_summary = proc.stderr
    return out


last_compile_summary = ""


def train(plan: PathLike, inputs: Optional[Mapping[str, Any]] = None,
          labels: Any = None, steps: int = 1, lr: Optional[float] = None,
          optimizer: str = "adamw", sync: bool = False, *,
          accumulate: int = 1, extra_args: Sequence[str] = (),
          **options) -> Iterator[float]:
    """Runs ``rp-run`` on ``plan`` and yields each step's loss as rp-run
    prints it (``step K loss V``), as the steps finish.

    ``inputs`` maps model input names to arrays (numpy arrays, or anything
    ``np.asarray`` takes, CPU torch tensors included) holding one global
    batch; ``labels`` the labels of that batch. They are written to
    temporary ``.npy`` files and passed as ``--input NAME=FILE`` and
    ``--labels FILE``; a path (str or PathLike) is passed as it is. Other
    rp-run flags are keyword options (``dump_grads="g.safetensors"``,
    ``backend="sim"``, ``threads=4``); ``extra_args`` are flags passed as
    written.
    ``sync=False`` is rp-run's default async mode (one step stale).
    ``lr=None`` is rp-run's default (1e-3), or with ``resume=DIR`` the
    checkpoint's learning rate and schedule, as the run that wrote it.
    ``accumulate=K`` runs K passes of the plan's microbatches per optimizer
    step (rp-run ``--accumulate``): the inputs then hold K global batches,
    and each yielded loss is the step's mean over all of them.

    The run starts when the first loss is asked for. If rp-run fails, the
    iterator raises ToolError carrying rp-run's stderr; if the caller stops
    early, rp-run is stopped."""
    for _, loss in train_steps(plan, inputs, labels, steps, lr, optimizer,
                               sync, accumulate=accumulate,
                               extra_args=extra_args, **options):
        yield loss


def train_steps(plan: PathLike, inputs: Optional[Mapping[str, Any]] = None,
                labels: Any = None, steps: int = 1, lr: Optional[float] = None,
                optimizer: str = "adamw", sync: bool = False, *,
                accumulate: int = 1, extra_args: Sequence[str] = (),
                progress: Union[bool, str] = False,
                **options) -> Iterator[Tuple[int, float]]:
    """As ``train``, yielding ``(step, loss)``: the step number as rp-run
    prints it (it continues after ``resume=DIR``). ``progress=True`` shows
    rp-run's stderr (its progress line: step, loss, lr, tokens/s, ETA, then
    its summary) on this process's stderr as it comes; ``"steps"`` the
    progress line alone (and errors)."""
    if isinstance(accumulate, bool) or not isinstance(accumulate, int) \
            or accumulate < 1:
        raise ValueError(f"accumulate={accumulate!r}: give the number of "
                         "passes per optimizer step, an int of 1 or more")
    args = [str(plan), f"--steps={steps}",
            f"--optimizer={optimizer}", "--sync" if sync else "--async",
            f"--accumulate={accumulate}"]
    if lr is not None:
        args.append(f"--lr={lr!r}")
    with tempfile.TemporaryDirectory(prefix="rp-train-") as tmp:
        for name, value in (inputs or {}).items():
            path = _npy(value, Path(tmp) / f"input-{len(args)}.npy")
            args.append(f"--input={name}={path}")
        if labels is not None:
            args.append(f"--labels={_npy(labels, Path(tmp) / 'labels.npy')}")
        args += _flags(options) + list(extra_args)
        tool = find_tool("rp-run")
        with open(Path(tmp) / "stderr.txt", "w+") as err:
            proc = subprocess.Popen(
                [str(tool), *args], stdout=subprocess.PIPE,
                stderr=subprocess.PIPE if progress else err, text=True)
            tee = (_tee(proc.stderr, err, progress == "steps")
                   if progress else None)
            try:
                assert proc.stdout is not None
                for line in proc.stdout:
                    m = _STEP.match(line.strip())
                    if m:
                        yield int(m.group(1)), float(m.group(2))
                rc = proc.wait()
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                if tee is not None:
                    tee.join()
            if rc != 0:
                err.seek(0)
                raise ToolError("rp-run", rc, err.read())


def _tee(stream, copy, only_steps: bool):
    """A thread copying ``stream`` to the file ``copy`` and to stderr, a
    line (up to each carriage return or newline) at a time, so that a
    progress line shows as it is redrawn; ``only_steps`` shows only the
    progress lines, the async-mode note and errors."""
    import sys
    import threading

    shown = ("rp-run: step ", "rp-run: eval ", "async mode", "error",
             "warning")

    def pump():
        line, last = "", "\n"
        while True:
            chunk = stream.read(1)
            if not chunk:
                break
            copy.write(chunk)
            line += chunk
            if chunk not in "\r\n":
                continue
            keep = not only_steps or any(s in line for s in shown) or (
                line == "\n" and last == "\r")
            if keep:
                sys.stderr.write(line)
                sys.stderr.flush()
                last = chunk
            line = ""
        if line:
            sys.stderr.write(line)

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return thread


def _npy(value, path: Path) -> Path:
    """The .npy file holding ``value``: itself when it is a path, else
    ``path`` written with it."""
    if isinstance(value, (str, os.PathLike)):
        return Path(value)
    import numpy as np
    np.save(path, _array(value))
    return path


def _array(value):
    import numpy as np
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.ascontiguousarray(np.asarray(value))
