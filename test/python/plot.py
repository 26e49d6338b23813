# RUN: rm -rf %t && mkdir -p %t
# RUN: rp-compile %models/gpt_op17.onnx -o %t/p.rpplan --devices 2 --stages "fwd:1,1;bwd:2,1,1"
# RUN: rp-run %t/p.rpplan --steps 3 --trace %t/t.json > %t/run.log
# RUN: rp-run %t/p.rpplan --describe=json > %t/plan.json
# RUN: %PYTHON %s %t | FileCheck %s

# rp.plot draws with matplotlib and returns the Figure: a loss curve has
# one point per loss (from a list, a dict of runs, or rp-run's log), a
# timeline one rectangle per span of the step in the trace and one
# predicted bar per job the compiler timed; the files are written in the
# format their suffix names; bad input is rp.plot.PlotError.

import json
import sys
from pathlib import Path

from rp import plot

out = Path(sys.argv[1])
MAGIC = {".png": b"\x89PNG", ".pdf": b"%PDF", ".svg": b"<?xml"}


def written(path):
    return path.is_file() and path.read_bytes()[:4] == MAGIC[path.suffix][:4]


fig = plot.loss_curve([3.0, 2.5, 2.25, 2.0], out / "list.png")
line = fig.axes[0].lines[0]
# CHECK: list: 1 curve, x [0, 1, 2, 3], y [3.0, 2.5, 2.25, 2.0], written True
print(f"list: {len(fig.axes[0].lines)} curve, "
      f"x {[int(v) for v in line.get_xdata()]}, "
      f"y {[float(v) for v in line.get_ydata()]}, "
      f"written {written(out / 'list.png')}")

log = [l for l in (out / "run.log").read_text().splitlines()]
fig = plot.loss_curve(out / "run.log", out / "log.svg", title="gpt")
ys = list(fig.axes[0].lines[0].get_ydata())
# CHECK: log: 3 lines, 3 points equal to the log's: True, title gpt, written True
print(f"log: {len(log)} lines, {len(ys)} points equal to the log's: "
      f"{ys == [float(l.split()[-1]) for l in log]}, title "
      f"{fig.axes[0].get_title()}, written {written(out / 'log.svg')}")

fig = plot.loss_curve({"a": [1.0, 0.5], "b": out / "run.log"}, out / "two.pdf")
# CHECK: runs: curves a b points [2, 3], written True
print("runs: curves", *[t.get_text() for t in fig.axes[0].get_legend().get_texts()],
      f"points {[len(l.get_xdata()) for l in fig.axes[0].lines]}, written "
      f"{written(out / 'two.pdf')}")

events = json.load(open(out / "t.json"))["traceEvents"]
step1 = [e for e in events if e["ph"] == "X" and e["args"].get("step") == 1]
rows = {(e["pid"], e["tid"]) for e in step1}
fig = plot.timeline(out / "t.json", out / "tl.png", step=1)
ax = fig.axes[0]
spans = [p for p in ax.patches if p.get_gid() == "span"]
# CHECK: timeline: every span of step 1 drawn once on its row: True
print("timeline: every span of step 1 drawn once on its row:",
      len(spans) == len(step1) > 0 and len(ax.get_yticks()) == len(rows),
      f"({len(spans)} spans, {len(rows)} rows)")
# The widths are the spans' durations in ms.
# CHECK: timeline: widths are durations: True written True
print("timeline: widths are durations:",
      sorted(round(p.get_width(), 6) for p in spans) ==
      sorted(round(e["dur"] / 1e3, 6) for e in step1),
      f"written {written(out / 'tl.png')}")

jobs = json.load(open(out / "plan.json"))["jobs"]
timed = [j for j in jobs if j.get("predicted_ms", 0) > 0]
fig = plot.timeline(out / "t.json", None, step=1, plan=out / "plan.json")
bars = [p for p in fig.axes[0].patches if p.get_gid() == "predicted"]
# CHECK: predicted: one bar per timed job: True
print("predicted: one bar per timed job:", len(bars) == len(timed) > 0,
      f"({len(bars)})")

for what, fn in [
        ("empty", lambda: plot.loss_curve([])),
        ("no steps", lambda: plot.loss_curve(out / "plan.json")),
        ("missing log", lambda: plot.loss_curve(out / "nope.log")),
        ("no such step", lambda: plot.timeline(out / "t.json", step=99)),
        ("bad plan", lambda: plot.timeline(out / "t.json", plan=out / "run.log"))]:
    try:
        fn()
        print(what, "plotted")
    except plot.PlotError as err:
        print(what, "PlotError:", str(err).replace(str(out) + "/", ""))
# CHECK: empty PlotError: rp.plot: no losses to plot
# CHECK: no steps PlotError: rp.plot: 'plan.json' has no 'step K loss V' lines; give rp-run's stdout (or the losses themselves)
# CHECK: missing log PlotError: rp.plot: cannot read log 'nope.log': No such file or directory
# CHECK: no such step PlotError: rp.plot: trace 't.json' has no spans for step 99
# CHECK: bad plan PlotError: rp.plot: cannot read plan 'run.log': Expecting value
