"""Prints a plan's passes in flight and whether its planned_peak_bytes are
the run's: arena_copies copies of the largest one-pass peak (the IR's
peak_bytes) on every device when two passes rename the devices.

Usage: run_peak_check.py DESCRIBED.json TRAIN.mlir
"""
import json
import re
import sys

described = json.load(open(sys.argv[1]))
ir = open(sys.argv[2]).read()
peaks = [int(x) for x in
         re.search(r"peak_bytes = array<i64: ([^>]*)>", ir).group(1).split(",")]
copies = described.get("arena_copies") or described["passes_in_flight"]
run = [copies * max(peaks)] * len(peaks)
print("passes", described["passes_in_flight"], "planned",
      described["planned_peak_bytes"] == run)
