"""Writes a staged plan with one event record removed, and runs rp-run on it.

Usage: staged_faults.py FLATC SCHEMA GOOD.rpplan OUT_DIR RP-RUN

The record removed is that of the first compute job some other job waits
for. Validation must refuse the plan (exit 1, naming the stuck queue and
the event); with validation bypassed (--unchecked-events), the watchdog must
stop the step (exit 2) and name the waiting queue and event.
"""
import json
import os
import shutil
import subprocess
import sys

flatc, schema, good, out, rp_run = sys.argv[1:6]
os.makedirs(out, exist_ok=True)
subprocess.run([flatc, "--json", "--strict-json", "--raw-binary",
                "--defaults-json", "-o", out, schema, "--", good], check=True)
base = os.path.splitext(os.path.basename(good))[0]
plan = json.load(open(os.path.join(out, base + ".json")))
for f in plan["weight_files"]:
    shutil.copy(os.path.join(os.path.dirname(good), f["path"]), out)
waited = {e for j in plan["jobs"] for e in j.get("waits", [])}
victim = next(j for j in plan["jobs"] if j["kind"] == "run" and
              any(e in waited for e in j.get("records", [])))
event = victim["records"][0]
victim["records"] = []
print("removed the record of event %d from '%s'" % (event, victim["label"]))
path = os.path.join(out, "broken.json")
json.dump(plan, open(path, "w"))
subprocess.run([flatc, "-b", "-o", out, schema, path], check=True)
broken = os.path.join(out, "broken.rpplan")
for extra in ([], ["--unchecked-events", "--watchdog-ms", "300"]):
    r = subprocess.run([rp_run, broken, "--steps", "1"] + extra,
                       capture_output=True, text=True, timeout=120)
    print("exit %d: %s" % (r.returncode, r.stderr.strip().splitlines()[-1]))
