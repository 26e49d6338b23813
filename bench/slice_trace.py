"""Where a sliced plan's steady step goes, read from the sim's trace
(issue 35, docs/token-slices.md "The 64k row's waits, read per job").

Usage: rp-run PLAN --backend sim --steps 8 --trace T.json
       python3 bench/slice_trace.py T.json [--step N]

Prints, per device and step over the middle third of the run's steps:
the compute queue's busy time by program (layer names folded), its idle
gaps named by the jobs before and after them ("inside B": between two
commands of one backward job), and for one step (--step, default the
middle one) each job's device, start, end, busy and gaps, and each
backward job's per-slice busy/gap before it, last slice first.
"""

import argparse
import collections
import json
import re
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--step", type=int)
    a = ap.parse_args()
    try:
        t = json.load(open(a.trace))
    except (OSError, ValueError) as e:
        sys.exit(f"slice_trace: cannot read {a.trace}: {e}")
    ev = t["traceEvents"] if isinstance(t, dict) else t
    names = {e["pid"]: e["args"]["name"] for e in ev
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    devices = sorted(p for p, n in names.items() if n.startswith("device"))
    host = [p for p, n in names.items() if n == "host"]
    if not devices or not host:
        sys.exit(f"slice_trace: {a.trace} is not a staged plan's sim trace")
    steps = sorted((e for e in ev if e.get("pid") == host[0]
                    and e.get("name", "").startswith("step ")),
                   key=lambda e: e["ts"])
    lo_i, hi_i = len(steps) // 3, 2 * len(steps) // 3
    if hi_i <= lo_i:
        sys.exit("slice_trace: too few steps in the trace (run --steps 8)")
    lo, hi, n = steps[lo_i]["ts"], steps[hi_i]["ts"], hi_i - lo_i
    # "recompute" events annotate the share of a backward command that
    # recomputes; they overlap the command and are not compute of their own.
    comp = [e for e in ev if e.get("ph") == "X" and e.get("tid") == 1
            and e["pid"] in devices and e["name"] != "recompute"]
    per = len(devices) * n * 1000.0
    busy, idle = collections.Counter(), collections.Counter()
    for d in devices:
        prev = None
        for e in sorted((e for e in comp if e["pid"] == d),
                        key=lambda e: e["ts"]):
            end = e["ts"] + e["dur"]
            if end > lo and e["ts"] < hi:
                prog = re.sub(r" slot\d+", "", e["args"].get("program", "?"))
                prog = re.sub(r"layers\.\d+(\.\.layers\.\d+)?", "L", prog)
                busy[prog] += min(end, hi) - max(e["ts"], lo)
                if prev is not None:
                    gap = max(e["ts"], lo) - max(prev["ts"] + prev["dur"], lo)
                    p, q = prev["name"].split()[0], e["name"].split()[0]
                    if gap > 0:
                        idle["inside " + p[0] if p == q
                             else f"{p[0]} -> {q[0]}"] += gap
            prev = e
    print(f"period {(hi - lo) / n / 1000:.1f} ms; per device and step:")
    print(f"busy {sum(busy.values()) / per:.1f} ms")
    for k, v in busy.most_common():
        print(f"  {v / per:8.1f}  {k}")
    print(f"idle {sum(idle.values()) / per:.1f} ms")
    for k, v in idle.most_common():
        print(f"  {v / per:8.1f}  {k}")

    step = a.step if a.step is not None else int(
        steps[(lo_i + hi_i) // 2]["args"]["step"])
    mine = [e for e in comp if e["args"].get("step") == step]
    if not mine:
        sys.exit(f"slice_trace: no commands of step {step}")
    t0 = min(e["ts"] for e in mine)
    jobs = collections.defaultdict(list)
    for e in mine:
        jobs[e["name"].split()[0]].append(e)
    print(f"step {step}, per job (ms from its first command):")
    for name, es in sorted(jobs.items(),
                           key=lambda kv: min(e["ts"] for e in kv[1])):
        es.sort(key=lambda e: e["ts"])
        sl, gap = collections.Counter(), collections.Counter()
        for e in es:
            sl[e["args"]["microbatch"]] += e["dur"] / 1000
        for x, y in zip(es, es[1:]):
            gap[y["args"]["microbatch"]] += max(
                0, y["ts"] - x["ts"] - x["dur"]) / 1000
        start, end = es[0]["ts"], es[-1]["ts"] + es[-1]["dur"]
        print(f"  {name:5s} {names[es[0]['pid']]:9s} {(start - t0) / 1000:8.1f}"
              f" - {(end - t0) / 1000:8.1f}  busy {sum(sl.values()):7.1f}"
              f"  gaps {sum(gap.values()):6.1f}")
        if name.startswith("B"):
            print("        slice busy/gap: " + " ".join(
                f"{k}:{sl[k]:.0f}/{gap[k]:.0f}" for k in sorted(sl, reverse=True)))


if __name__ == "__main__":
    main()
