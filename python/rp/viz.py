"""Draws a Chrome trace of rp-run (--trace) as an SVG timeline.

Usage: python -m rp.viz TRACE.json -o timeline.svg|.png|.pdf [--step K]
                        [--plan PLAN.json] [--matplotlib]

One row per track of the trace (each device's compute, weight upload,
activation upload and download queues, then the host's step and optimizer
tracks), in the trace's own order; every span a rectangle coloured by what
it is: forward, fused tail, backward, the recompute at the start of a
backward (nested in its span), weight upload, activation upload,
download, optimizer, host; and shaded by its stage (stages 0-3, 4-7, ...
from full colour towards white), so a device's successive stages stand
apart. With --step, only that step's spans (by their
`step` argument). With --plan (`rp-run PLAN --describe=json`), the
compiler's predicted timeline of the step (each job's predicted start and
duration) is drawn under the measured one in every row, from the step's
first span, so prediction and measurement compare at a glance. An .svg
is written by hand (no third-party library; every span has a tooltip); a
.png or .pdf, or any output with --matplotlib, is drawn by rp.plot.timeline
with matplotlib.
"""

import argparse
import html
import sys

from rp.traces import HOST, KINDS, colour_of, kind_of, load, predicted_spans


def render(rows, label, spans, predicted=(), width=1600, row_h=18, left=190):
    if not spans:
        raise SystemExit("rp.viz: the trace has no spans (for that step)")
    t0 = min(e["ts"] for e in spans)
    t1 = max(e["ts"] + e["dur"] for e in spans)
    if predicted:
        t1 = max(t1, t0 + max(s + d for _, _, s, d in predicted))
    scale = (width - left - 10) / max(t1 - t0, 1e-9)
    top = 30
    height = top + row_h * len(rows) + 40
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif" font-size="11">' % (width, height),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="18">%.3f ms, %d spans</text>'
           % (left, (t1 - t0) / 1e3, len(spans))]
    index = {r: i for i, r in enumerate(rows)}
    for r, i in index.items():
        y = top + i * row_h
        out.append('<text x="4" y="%d">%s</text>'
                   % (y + row_h - 5, html.escape(label[r])))
        out.append('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#eee"/>'
                   % (left, width - 10, y + row_h, y + row_h))
    for e in spans:
        kind, colour = colour_of(e)
        x = left + (e["ts"] - t0) * scale
        w = max(e["dur"] * scale, 0.5)
        y = top + index[(e["pid"], e["tid"])] * row_h + 2
        out.append('<rect class="span" x="%.2f" y="%d" width="%.2f" height="%d" '
                   'fill="%s"><title>%s (%s, %.1f us)</title></rect>'
                   % (x, y, w, row_h - 4, colour, html.escape(e["name"]),
                      kind, e["dur"]))
    by_name = {label[r]: i for r, i in index.items()}
    drawn = 0
    for row, name, start, dur in predicted:
        if row not in by_name:
            continue
        kind, colour = kind_of(name)
        y = top + by_name[row] * row_h + row_h - 5
        out.append('<rect class="predicted" x="%.2f" y="%d" width="%.2f" '
                   'height="3" fill="%s" opacity="0.6"><title>predicted %s '
                   '(%.1f us)</title></rect>'
                   % (left + start * scale, y, max(dur * scale, 0.5), colour,
                      html.escape(name), dur))
        drawn += 1
    if predicted:
        end = max(s + d for _, _, s, d in predicted)
        out.append('<text x="%d" y="18">predicted (thin bars): %.3f ms, '
                   '%d spans</text>' % (left + 260, end / 1e3, drawn))
    y = top + len(rows) * row_h + 20
    x = left
    for _, kind, colour in KINDS + [(None,) + HOST]:
        out.append('<rect x="%d" y="%d" width="10" height="10" fill="%s"/>'
                   '<text x="%d" y="%d">%s</text>'
                   % (x, y - 9, colour, x + 14, y, kind))
        x += 20 + 7 * len(kind)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m rp.viz",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("trace")
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("--step", type=int)
    parser.add_argument("--plan", help="rp-run PLAN --describe=json output: "
                        "draw the predicted timeline too")
    parser.add_argument("--matplotlib", action="store_true",
                        help="draw with matplotlib (the default for "
                        "outputs other than .svg)")
    args = parser.parse_args(argv)
    if args.matplotlib or not args.output.lower().endswith(".svg"):
        from rp import plot
        try:
            fig = plot.timeline(args.trace, args.output, args.step, args.plan)
        except plot.PlotError as err:
            raise SystemExit(str(err).replace("rp.plot:", "rp.viz:", 1))
        spans = [p for p in fig.axes[0].patches if p.get_gid() == "span"]
        print("rp.viz: %s: %d rows, %d spans (matplotlib)"
              % (args.output, len(fig.axes[0].get_yticks()), len(spans)),
              file=sys.stderr)
        return 0
    try:
        rows, label, spans = load(args.trace, args.step)
    except (OSError, ValueError) as err:
        raise SystemExit("rp.viz: cannot read trace '%s': %s" % (args.trace, err))
    predicted = []
    if args.plan:
        try:
            predicted = predicted_spans(args.plan)
        except (OSError, ValueError) as err:
            raise SystemExit("rp.viz: cannot read plan '%s': %s" % (args.plan, err))
    svg = render(rows, label, spans, predicted)
    tmp = args.output + ".tmp"
    with open(tmp, "w") as f:
        f.write(svg)
    import os
    os.replace(tmp, args.output)
    print("rp.viz: %s: %d rows, %d spans" % (args.output, len(rows), len(spans)),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
