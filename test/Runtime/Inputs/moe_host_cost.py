"""The sim charges a profile's moe_host_us once per moe_route and
moe_route_grad call each run job's program makes, on measured times too: a small MoE plan on
two devices, its devices' compute in one pass with the term at 0 and at
1000 us.
Prints the routings per pass and each way's added milliseconds.

Usage: moe_host_cost.py PLAN PROFILE.json MEASURED.json (tools from
$RP_BIN)"""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

BIN = Path(os.environ["RP_BIN"])
plan, profile, measured = sys.argv[1:4]
desc = json.loads(subprocess.run([str(BIN / "rp-run"), plan,
                                   "--describe=json"], check=True,
                                  capture_output=True, text=True).stdout)
routes = sum(sum(c["op"] in ("moe_route", "moe_route_grad")
                 for c in desc["programs"][j["program"]]["calls"])
             for j in desc["jobs"] if j["kind"] == "run")
print(f"routings per pass {routes}")


def busy_ms(hw, extra=()):
    r = subprocess.run([str(BIN / "rp-run"), plan, "--backend", "sim",
                        "--step-barrier", "--hw", hw, *extra],
                       check=True, capture_output=True, text=True)
    # The devices' compute in one pass: every routing's host work once.
    return sum(float(l.split()[1]) for l in r.stdout.splitlines()
               if l.startswith("device") and "_busy_ms " in l)


with tempfile.TemporaryDirectory() as tmp:
    p = json.loads(Path(profile).read_text())
    p["moe_host_us"] = 1000
    with_host = Path(tmp) / "moe.json"
    with_host.write_text(json.dumps(p))
    for label, extra in (("model", ()), ("measured", ("--measured",
                                                      measured))):
        added = busy_ms(str(with_host), extra) - busy_ms(profile, extra)
        print(f"{label}: added {added:.3f} ms, one per routing: "
              f"{abs(added - routes) < 1e-6 * routes + 1e-6}")
