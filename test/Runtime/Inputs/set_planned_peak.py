"""Rewrites a plan's planned_peak_bytes, as a compiler whose memory model
missed buffers would have written them (the exporter raises the peak to the
runtime's own packing, so a plan it writes never shows that).

Usage: set_planned_peak.py FLATC SCHEMA IN.rpplan OUT.rpplan BYTES...
"""
import json
import os
import subprocess
import sys

flatc, schema, good, out = sys.argv[1:5]
peaks = [int(b) for b in sys.argv[5:]]
folder = os.path.dirname(os.path.abspath(out))
subprocess.run([flatc, "--json", "--strict-json", "--raw-binary",
                "--defaults-json", "-o", folder, schema, "--", good],
               check=True)
described = os.path.join(
    folder, os.path.splitext(os.path.basename(good))[0] + ".json")
plan = json.load(open(described))
plan["planned_peak_bytes"] = peaks
name = os.path.splitext(os.path.basename(out))[0]
path = os.path.join(folder, name + ".json")
json.dump(plan, open(path, "w"))
# flatc names the binary after the JSON file and the schema's extension.
subprocess.run([flatc, "-b", "-o", folder, schema, path], check=True)
