"""The host executor's cost per run job and per kernel call, measured from
rp-run on the host backend (issue 32: the profiles' `job_us` and
`launch_us` rows).

Usage: python3 bench/launch_cost.py [--steps 40] [--repeats 3]

A tiny Qwen3-shaped graph (4 layers, hidden 32, 16 tokens: every kernel's
arithmetic is well under a microsecond) is compiled for 2 host devices,
round-robin, 8 microbatches, layer-grain recompute, and trained with
`rp-run --backend host --init-weights random --trace --profile`. Then:

- per kernel call: each run job's span (the device thread running its
  program) against its program's kernel calls (`rp-run --describe=json`),
  over the decoder layers' forward, recompute and backward programs
  (16-70 calls each), fitted by least squares, span = a + b x calls; b is
  what one kernel call costs the host backend (its dispatch through the
  kernel table and its tiny arithmetic: an upper bound on the dispatch
  alone), a what running a program costs beyond its calls;
- per job: how long after the last job it waits on (another thread's
  event) a job starts, where that job and not its own queue held it back:
  the executor's event and thread hand-off (`handoff_us`, the profile's
  `job_us`, which the timing core charges where a job waits on another
  queue); and the gap between two jobs already queued back to back on
  one thread (`back_to_back_us`, which it does not charge);
- the figures `--profile` writes (per layer, forward and backward ms),
  which at this size are those costs alone.

Prints one `key value` line per figure (medians over the repeats). The
CUDA backend's launch cost is not this figure: it needs a GPU run
(`rp-run --backend cuda --profile`, docs/hardware-profiles.md).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
from rp import shapes  # noqa: E402

BIN = Path(os.environ.get("RP_BIN", ROOT / "build/bin"))
TINY = shapes.Shape(4, 32, 2, 1, 16, 64, 256, False, True)


def fit(points):
    """Least squares y = a + b x over [(x, y)]."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    b = sum((x - mx) * (y - my) for x, y in points) / sxx
    return my - b * mx, b


def measure(tmp, plan, desc, steps):
    calls = {p["name"]: len(p.get("calls", [])) for p in desc["programs"]}
    trace = Path(tmp) / "t.json"
    prof = Path(tmp) / "p.json"
    for f in (trace, prof):
        f.unlink(missing_ok=True)
    subprocess.run([str(BIN / "rp-run"), str(plan), "--backend", "host",
                    "--init-weights", "random:1", "--steps", str(steps),
                    "--trace", str(trace), "--profile", str(prof)],
                   check=True, capture_output=True)
    spans = [e for e in json.loads(trace.read_text())["traceEvents"]
             if e.get("ph") == "X" and e.get("cat") in ("compute", "copy")
             and e["args"].get("step", 0) > 0 and "job" in e["args"]]
    # Per kernel call: the programs that compute (the gradient
    # accumulators' programs are views and copies, timed apart).
    # The layers' own programs (not the fused tail's loss and vocabulary
    # sized head, nor the embedding's gather).
    points = [(calls[e["args"]["program"]], e["dur"]) for e in spans
              if e["args"].get("program", "").startswith("layers.")
              and ".." not in e["args"]["program"]]
    a, b = fit(points)
    # Per job: how long after the last job it waits on ends (its event
    # recorded, on another thread) a job starts, where that job, not its
    # own queue, held it back: the executor's event and thread hand-off.
    at = {(e["args"]["job"], e["args"]["step"]): e for e in spans}
    recorder = {}
    for i, j in enumerate(desc["jobs"]):
        for ev in j.get("records", []):
            recorder.setdefault(ev, i)
    queue_end = {}
    for e in sorted(spans, key=lambda e: e["ts"]):
        key = (e["pid"], e["tid"])
        prev = queue_end.get(key)
        queue_end[key] = e["ts"] + e["dur"]
        deps = [at.get((recorder[ev], e["args"]["step"]))
                for ev in desc["jobs"][e["args"]["job"]].get("waits", [])
                if ev in recorder]
        deps = [d for d in deps if d is not None and d is not e]
        if not deps:
            continue
        ready = max(d["ts"] + d["dur"] for d in deps)
        if ready >= e["ts"] or (prev is not None and prev >= ready):
            continue
        e["handoff"] = e["ts"] - ready
    handoffs = [e["handoff"] for e in spans if "handoff" in e]
    back = []
    for key in {(e["pid"], e["tid"]) for e in spans}:
        q = sorted((e for e in spans if (e["pid"], e["tid"]) == key),
                   key=lambda e: e["ts"])
        back += [y["ts"] - x["ts"] - x["dur"] for x, y in zip(q, q[1:])
                 if "handoff" not in y]
    layers = json.loads(prof.read_text())["layers"]
    fwd = statistics.median(l["forward_ms"] for l in layers
                            if l["name"].startswith("layers."))
    return (a, b, statistics.median(handoffs), statistics.median(
        [g for g in back if g >= 0]), fwd, len(points), len(handoffs))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        graph = Path(tmp) / "tiny.mlir"
        graph.write_text(shapes.build(TINY, 1, 16, "f32"))
        plan = Path(tmp) / "tiny.rpplan"
        subprocess.run([str(BIN / "rp-compile"), str(graph), "-o", str(plan),
                        "--devices", "2", "--microbatches", "8", "--hw",
                        "host", "--recompute", "layer"], check=True,
                       capture_output=True)
        desc = json.loads(subprocess.run(
            [str(BIN / "rp-run"), str(plan), "--describe=json"], check=True,
            capture_output=True, text=True).stdout)
        runs = [measure(tmp, plan, desc, args.steps)
                for _ in range(args.repeats)]
    a, b, handoff, back, fwd = (statistics.median(r[i] for r in runs)
                                for i in range(5))
    print(f"fit_spans {runs[0][5]}")
    print(f"handoffs {runs[0][6]}")
    print(f"launch_us {b:.2f}")
    print(f"program_us {a:.2f}")
    print(f"handoff_us {handoff:.2f}")
    print(f"back_to_back_us {back:.2f}")
    # The profile's job_us is the hand-off alone (the timing core charges
    # it where a job waits on another queue); program_us is left out.
    print(f"job_us {handoff:.2f}")
    print(f"profile_layer_forward_ms {fwd:.4f}")


if __name__ == "__main__":
    main()
