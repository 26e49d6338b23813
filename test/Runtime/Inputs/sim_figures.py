"""Checks on rp-run --backend sim's figures and virtual-time traces.

  sim_figures.py less KEY A.txt B.txt [FACTOR]
      KEY in A (times FACTOR, default 1) is below KEY in B; exit 1 if not.
  sim_figures.py below A.txt KEY1 KEY2
      KEY1 is below KEY2 in A; exit 1 if not.
  sim_figures.py starts TRACE.json
      per traced step, the device of its first job and when it starts, and
      whether it starts before the previous step's last job ends.
"""
import json
import sys


def figures(path):
    out = {}
    with open(path) as f:
        for line in f:
            key, value = line.split()
            out[key] = float(value)
    return out


def less(key, a, b, factor=1.0):
    x, y = figures(a)[key] * factor, figures(b)[key]
    if not x < y:
        print(f"error: {key}: {x} (x{factor}) is not below {y}")
        return 1
    print(f"ok: {key} {x:.6g} < {y:.6g}")
    return 0


def below(path, k1, k2):
    f = figures(path)
    if not f[k1] < f[k2]:
        print(f"error: {k1} {f[k1]} is not below {k2} {f[k2]}")
        return 1
    print(f"ok: {k1} {f[k1]:.6g} < {k2} {f[k2]:.6g}")
    return 0


def starts(path):
    with open(path) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    jobs = [e for e in events
            if e.get("ph") == "X" and e.get("cat") != "host"
            and "step" in e.get("args", {})]
    steps = sorted({e["args"]["step"] for e in jobs})
    last_end = None
    for s in steps:
        mine = [e for e in jobs if e["args"]["step"] == s]
        first = min(mine, key=lambda e: (e["args"]["job"], e["ts"]))
        begin = min(e["ts"] for e in mine)
        overlap = last_end is not None and begin < last_end
        # Chrome trace pids number devices from 1.
        print(f"step {s} starts on device {first['pid'] - 1}"
              f"{', before the previous step ends' if overlap else ''}")
        last_end = max(e["ts"] + e["dur"] for e in mine)
    return 0


def gated(path):
    with open(path) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    update = {e["args"]["step"]: e["ts"] + e["dur"] for e in events
              if e.get("cat") == "host" and e.get("name") == "optimizer"}
    uploads = [e for e in events
               if e.get("cat") == "copy" and e["name"].startswith("UP ")]
    for s in sorted({e["args"]["step"] for e in uploads}):
        if s == 0 or s - 1 not in update:
            continue
        first = min(e["ts"] for e in uploads if e["args"]["step"] == s)
        print(f"step {s}'s first weight upload starts before step {s - 1}'s"
              f" update ends: {first < update[s - 1]}")
    return 0


def first_stage(path):
    """In sync mode, when each step's first stage job computes, as a
    share of the update before it (the update writes the parameters the
    stage chain reads first first)."""
    with open(path) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    update = {e["args"]["step"]: (e["ts"], e["dur"]) for e in events
              if e.get("cat") == "host" and e.get("name") == "optimizer"}
    starts = {}
    for e in events:
        if e.get("cat") in ("compute", "recompute") and \
                e["args"].get("stage") == 0:
            step = e["args"]["step"]
            starts[step] = min(starts.get(step, e["ts"]), e["ts"])
    for s in sorted(starts):
        if s == 0 or s - 1 not in update:
            continue
        t, d = update[s - 1]
        print(f"step {s}'s first stage computes before half of step "
              f"{s - 1}'s update: {starts[s] < t + d / 2}")
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "less":
        factor = float(sys.argv[5]) if len(sys.argv) > 5 else 1.0
        sys.exit(less(sys.argv[2], sys.argv[3], sys.argv[4], factor))
    if sys.argv[1] == "below":
        sys.exit(below(sys.argv[2], sys.argv[3], sys.argv[4]))
    if sys.argv[1] == "starts":
        sys.exit(starts(sys.argv[2]))
    if sys.argv[1] == "gated":
        sys.exit(gated(sys.argv[2]))
    if sys.argv[1] == "first-stage":
        sys.exit(first_stage(sys.argv[2]))
    sys.exit(f"unknown check {sys.argv[1]}")
