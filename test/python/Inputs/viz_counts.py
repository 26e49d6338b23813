"""Compares an rp.viz SVG with its trace: one rectangle per span of the
step and one row per track that has one.

Usage: viz_counts.py TRACE.json TIMELINE.svg STEP [PLAN.json]

With PLAN.json (rp-run --describe=json), also one thin bar per job the
compiler estimated, none past the predicted end of the step.
"""
import json
import re
import sys

trace, svg, step = sys.argv[1], sys.argv[2], int(sys.argv[3])
events = json.load(open(trace))["traceEvents"]
spans = [e for e in events if e["ph"] == "X" and e["args"].get("step") == step]
rows = {(e["pid"], e["tid"]) for e in spans}
text = open(svg).read()
drawn = text.count('class="span"')
labels = len(re.findall(r'<text x="4"', text))
if drawn == len(spans) and labels == len(rows):
    print("every span of step %d drawn once: %d spans on %d rows"
          % (step, drawn, labels))
else:
    print("MISMATCH: %d spans, %d drawn; %d rows, %d labels"
          % (len(spans), drawn, len(rows), labels))

if len(sys.argv) > 4:
    jobs = json.load(open(sys.argv[4]))["jobs"]
    timed = [j for j in jobs if j.get("predicted_ms", 0) > 0]
    bars = text.count('class="predicted"')
    end = max(j.get("predicted_start_ms", 0) + j["predicted_ms"] for j in timed)
    print("%s: %d predicted bars for %d estimated jobs, step %.4f ms"
          % ("ok" if bars == len(timed) and timed else "MISMATCH", bars,
             len(timed), end))
