"""The compiler's predicted timeline and the sim device agree.

Compiles a model for several device counts, microbatch counts and
schedules on a profile whose GPUs share host links, and compares, per
plan, the predicted step (the jobs' end, from the plan's predicted times)
and each device's predicted compute busy time with what `rp-run --backend
sim` reports (jobs_ms, deviceN_busy_ms). Exits 1 when any differs by more
than 1%.

    sim_crosscheck.py RP_COMPILE RP_RUN MODEL PROFILE TMPDIR
"""

import json
import subprocess
import sys
from pathlib import Path

TOLERANCE = 0.01


def run(args):
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"failed ({r.returncode}): {' '.join(args)}\n{r.stderr}")
    return r.stdout


def main():
    rp_compile, rp_run, model, profile, tmp = sys.argv[1:]
    cases = []
    for g in (2, 3, 4):
        for sched in ("round-robin", "1f1b", "gpipe"):
            for m in (g + 1, 2 * g):
                cases.append((g, sched, m))
    cases.append((2, "interleaved-1f1b", 4))
    worst = 0.0
    for g, sched, m in cases:
        plan = Path(tmp) / f"g{g}-{sched}-m{m}.rpplan"
        run([rp_compile, model, "-o", str(plan), "--devices", str(g),
             "--microbatches", str(m), "--schedule", sched, "--hw", profile])
        desc = json.loads(run([rp_run, str(plan), "--describe=json"]))
        predicted_end = 0.0
        busy = [0.0] * g
        for j in desc["jobs"]:
            start = j.get("predicted_start_ms", 0.0)
            ms = j.get("predicted_ms", 0.0)
            predicted_end = max(predicted_end, start + ms)
            if j.get("queue", "compute") == "compute":
                busy[j.get("device", 0)] += ms
        figures = {}
        for line in run([rp_run, str(plan), "--backend", "sim",
                         "--sync"]).splitlines():
            key, value = line.split()
            figures[key] = float(value)
        errors = [abs(figures["jobs_ms"] - predicted_end) / predicted_end]
        for d in range(g):
            sim = figures[f"device{d}_busy_ms"]
            errors.append(abs(sim - busy[d]) / max(busy[d], 1e-12))
        err = max(errors)
        worst = max(worst, err)
        print(f"G={g} M={m} {sched}: predicted step {predicted_end:.4f} ms, "
              f"sim {figures['jobs_ms']:.4f} ms, worst difference "
              f"{100 * err:.4f}%")
        if err > TOLERANCE:
            sys.exit(f"{plan}: the sim and the prediction differ by "
                     f"{100 * err:.3f}% (more than {100 * TOLERANCE:.0f}%)")
    print(f"ok: {len(cases)} plans within {100 * TOLERANCE:.0f}% "
          f"(worst {100 * worst:.4f}%)")


if __name__ == "__main__":
    main()
