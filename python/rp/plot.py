"""Plots with matplotlib: a loss curve, and rp-run's trace as a timeline.

``loss_curve(losses, out)`` takes the losses (a sequence, or a dict of
labelled sequences to compare runs) or rp-run logs (the ``step K loss V``
lines of its stdout); ``timeline(trace, out, step=None, plan=None)`` draws
``rp-run --trace``'s Chrome trace as ``python -m rp.viz`` does (one row per
device queue and host track, one rectangle per span coloured by kind, the
compiler's predicted bars under the measured ones with ``plan``). Both
return the matplotlib Figure, so tests and notebooks can look at what was
drawn, and write ``out`` (format from its suffix: .png, .svg, .pdf)
atomically when given.

The figures are made with ``matplotlib.figure.Figure`` and the Agg canvas,
not pyplot: no display is needed and no global state is touched.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path
from typing import Mapping, Optional, Sequence, Union

from rp import traces


PathLike = Union[str, os.PathLike]
Losses = Union[Sequence[float], PathLike]

_STEP = re.compile(r"^step (\d+) loss (\S+)\s*$")


class PlotError(ValueError):
    """An input that cannot be plotted (no losses in a log, no spans)."""


def _require_matplotlib():
    if importlib.util.find_spec("matplotlib") is None:
        raise PlotError(
            "rp.plot needs matplotlib (Debian: apt-get install "
            "python3-matplotlib; pip: pip install matplotlib)")


def _figure(width, height):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    return fig


def _save(fig, out: Optional[PathLike]):
    if out is None:
        return
    out = Path(out)
    fmt = out.suffix.lstrip(".").lower() or "png"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    fig.savefig(tmp, format=fmt, dpi=120)
    os.replace(tmp, out)


def read_losses(log: PathLike):
    """The (steps, losses) of an rp-run log: its ``step K loss V`` lines
    (other lines, such as a progress line merged in, are skipped)."""
    try:
        text = Path(log).read_text()
    except OSError as err:
        raise PlotError(f"rp.plot: cannot read log '{log}': "
                        f"{err.strerror or err}") from err
    steps, losses = [], []
    for line in text.splitlines():
        m = _STEP.match(line.strip())
        if m:
            steps.append(int(m.group(1)))
            losses.append(float(m.group(2)))
    if not losses:
        raise PlotError(f"rp.plot: '{log}' has no 'step K loss V' lines; "
                        f"give rp-run's stdout (or the losses themselves)")
    return steps, losses


def _series(losses):
    if isinstance(losses, (str, os.PathLike)):
        return read_losses(losses)
    values = [float(v) for v in losses]
    if not values:
        raise PlotError("rp.plot: no losses to plot")
    return list(range(len(values))), values


def loss_curve(losses: Union[Losses, Mapping[str, Losses]],
               out: Optional[PathLike] = None,
               title: Optional[str] = None):
    """Plots loss against step, one line per run. ``losses`` is a sequence
    of losses (step 0 first), the path of an rp-run log, or a dict from a
    label to either, drawn as separate lines with a legend. Returns the
    Figure; writes ``out`` when given."""
    _require_matplotlib()
    runs = losses if isinstance(losses, Mapping) else {None: losses}
    if not runs:
        raise PlotError("rp.plot: no losses to plot")
    fig = _figure(6, 4)
    ax = fig.add_subplot()
    for label, run in runs.items():
        steps, values = _series(run)
        ax.plot(steps, values, marker="o" if len(values) <= 50 else None,
                markersize=3, label=label)
    from matplotlib.ticker import MaxNLocator
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.grid(True, alpha=0.3)
    if title:
        ax.set_title(title)
    if any(label is not None for label in runs):
        ax.legend()
    fig.tight_layout()
    _save(fig, out)
    return fig


def timeline(trace: PathLike, out: Optional[PathLike] = None,
             step: Optional[int] = None, plan: Optional[PathLike] = None):
    """Draws ``rp-run --trace``'s Chrome trace: one row per track, one
    rectangle (gid ``span``) per span of ``step`` (all steps when None),
    coloured by kind; with ``plan`` (``rp-run PLAN --describe=json``), a
    thin bar (gid ``predicted``) per job the compiler timed, from the
    first span. Times in milliseconds. Returns the Figure; writes ``out``
    when given."""
    _require_matplotlib()
    from matplotlib.patches import Patch, Rectangle

    try:
        rows, label, spans = traces.load(trace, step)
    except (OSError, ValueError) as err:
        raise PlotError(f"rp.plot: cannot read trace '{trace}': {err}") from err
    if not spans:
        raise PlotError(f"rp.plot: trace '{trace}' has no spans"
                        + (f" for step {step}" if step is not None else ""))
    predicted = []
    if plan is not None:
        try:
            predicted = traces.predicted_spans(plan)
        except (OSError, ValueError) as err:
            raise PlotError(f"rp.plot: cannot read plan '{plan}': "
                            f"{err}") from err
    t0 = min(e["ts"] for e in spans)
    t1 = max(e["ts"] + e["dur"] for e in spans)
    fig = _figure(12, 1.2 + 0.3 * len(rows))
    ax = fig.add_subplot()
    index = {r: i for i, r in enumerate(rows)}
    for e in spans:
        kind, colour = traces.colour_of(e)
        y = index[(e["pid"], e["tid"])]
        ax.add_patch(Rectangle(((e["ts"] - t0) / 1e3, y - 0.4),
                               e["dur"] / 1e3, 0.8, facecolor=colour,
                               gid="span"))
    by_name = {label[r]: i for r, i in index.items()}
    for row, name, start, dur in predicted:
        if row not in by_name:
            continue
        _, colour = traces.kind_of(name)
        ax.add_patch(Rectangle((start / 1e3, by_name[row] + 0.25), dur / 1e3,
                               0.12, facecolor=colour, alpha=0.6,
                               gid="predicted"))
        t1 = max(t1, t0 + start + dur)
    ax.set_xlim(0, (t1 - t0) / 1e3 * 1.01)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([label[r] for r in rows], fontsize=8)
    ax.set_xlabel("ms")
    kinds = traces.KINDS + [(None,) + traces.HOST]
    ax.legend(handles=[Patch(facecolor=c, label=k) for _, k, c in kinds],
              loc="upper center", bbox_to_anchor=(0.5, -0.25 if rows else 0),
              ncol=len(kinds), fontsize=8, frameon=False)
    title = f"{(t1 - t0) / 1e3:.3f} ms, {len(spans)} spans"
    if step is not None:
        title = f"step {step}: " + title
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    _save(fig, out)
    return fig
