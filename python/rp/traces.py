"""Spans of an `rp-run --trace` Chrome trace and of a plan's predicted jobs,
with the colour of each kind: what rp.viz (SVG) and rp.plot (matplotlib) both
draw. Apart from both so that neither imports the other to read a trace."""

import json
import re

KINDS = [  # (label pattern, kind, colour)
    (r"^F\d", "forward", "#4e79a7"),
    (r"^T\d", "fused tail", "#b07aa1"),
    (r"^B\d", "backward", "#e15759"),
    (r"^recompute$", "recompute", "#ff9da7"),
    (r"^UP ", "weight H2D", "#f28e2b"),
    (r"^(IN|DIN)", "activation H2D", "#edc948"),
    (r"^(OUT|DOUT|GRAD)", "D2H", "#59a14f"),
    (r"^optimizer", "optimizer", "#9c755f"),
]
HOST = ("host", "#bab0ac")


def kind_of(name):
    for pattern, kind, colour in KINDS:
        if re.match(pattern, name):
            return kind, colour
    return HOST


def shade(colour, stage):
    """`colour` lightened by the stage's place in a cycle of four."""
    if stage is None or stage < 0:
        return colour
    f = (stage % 4) * 0.15
    rgb = [int(colour[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join("%02x" % int(c + (255 - c) * f) for c in rgb)


def colour_of(e):
    """(kind, colour) of a trace span: its kind's colour, shaded by stage."""
    kind, colour = kind_of(e["name"])
    return kind, shade(colour, e.get("args", {}).get("stage"))


def load(path, step):
    events = json.load(open(path))
    if isinstance(events, dict):
        events = events.get("traceEvents", [])
    names, order, spans = {}, {}, []
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            names[(e["pid"], None)] = e["args"]["name"]
        elif e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
        elif e.get("ph") == "M" and e.get("name") == "thread_sort_index":
            order[(e["pid"], e["tid"])] = e["args"]["sort_index"]
        elif e.get("ph") == "X":
            if step is not None and e.get("args", {}).get("step") != step:
                continue
            spans.append(e)
    rows = sorted({(e["pid"], e["tid"]) for e in spans},
                  key=lambda r: (r[0], order.get(r, r[1])))
    label = {r: "%s %s" % (names.get((r[0], None), "pid %d" % r[0]),
                           names.get(r, "tid %d" % r[1])) for r in rows}
    return rows, label, spans


def predicted_spans(plan_path):
    """(row name, label, start us, duration us) of every estimated job."""
    plan = json.load(open(plan_path))
    out = []
    for j in plan.get("jobs", []):
        ms = j.get("predicted_ms", 0)
        if ms <= 0:
            continue
        row = "device %d %s" % (j.get("device", 0), j.get("queue", "compute"))
        out.append((row, j.get("label", ""), j.get("predicted_start_ms", 0) * 1e3,
                    ms * 1e3))
    return out
