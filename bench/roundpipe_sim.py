"""RoundPipe's simulator inputs given to rp, beside RoundPipe's results.

Usage: python3 bench/roundpipe_sim.py [--models 1.7b,8b,...] [--no-search]

RoundPipe's artifact simulator (pp-simulate/run.sh; reference/roundpipe.md
§6) times one iteration of 8 GPUs and 16 microbatches from measured
per-layer forward and backward times, LM-head times and one transfer time
per hop between GPUs. This script gives rp the same inputs: a graph with
the model's layer count (rp.shapes, a narrow stand-in whose weights are a
few percent of an activation, so weight uploads cost next to nothing, as
in RoundPipe's simulator), the per-layer times as a measured profile
(the embedding 0 ms; the head its LM-head times; the backward holding
the gradient adds, as RoundPipe times it), and a hardware profile
whose host link moves one activation in half a hop each way (rp bounces
activations through host memory: a download, then an upload), with a free
optimizer. rp-opt -rp-print-partition times the round-robin schedule with
rp's timing analysis: one step alone (fill and drain included, as
RoundPipe's single-iteration makespan) and the steady state of steps run
back to back (fill and drain once per run; compare its bubble with
RoundPipe's async column, which counts switch and intra bubbles only).
Rows: rp with RoundPipe's partition, rp's own partitioner with one tail
job (rp-compile's default), rp's partitioner free to run the fused tail as
two stage jobs taking alternate microbatches (tail-jobs=0: the faster of
one and two; plans run it, so it has sim figures), rp's partitioner with
the tail as a pair split by layers (tail-jobs=3; "pair at 0": the search
kept one tail job; the compiler's timing model only, no sim figure), and
Looped-BFS (rp's static schedule, one step alone on the sim, beside
RoundPipe's simulated Looped-BFS makespan). "sim" is
the plan of that partition exported by rp-compile and run on the sim device
with the same measured times (rp-run --backend sim --measured, one step
alone, --sync): the executor's barrier-separated step, which the compiler's
one-step figure predicts.

RoundPipe's simulator times one iteration; its steady step is derived the
way its async bubble is (the next iteration fills the GPUs the drain
frees): the same work over 8 GPUs at its async bubble, makespan x (1 -
sync bubble) / (1 - async bubble). rp's steady step is timed, not derived.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
from rp import shapes  # noqa: E402

BIN = Path(os.environ.get("RP_BIN", ROOT / "build/bin"))
RP_OPT = os.environ.get("RP_OPT", str(BIN / "rp-opt"))
G, M = 8, 16
SEQ, HIDDEN = 8192, 32  # stand-in: 512 KiB activations, 12 KiB of weights

# pp-simulate/run.sh: layers, fwd/layer, bwd/layer, LM-head fwd, LM-head
# bwd, comm/hop (ms), RoundPipe's partition (forward | backward, the 0 is
# the fused LM-head stage); pp-simulate/log: makespan (ms), async bubble %,
# sync bubble %, Looped-BFS makespan (ms).
MODELS = {
    "1.7b": (28, 7.429, 15.831, 22.0655, 43.707, 1.6,
             [7] * 4, [3] * 8 + [2, 2], 2286.02, 4.05, 19.07, 2467.27),
    "8b": (32, 18.50370313, 41.20659375, 37.2255, 74.501, 3.2,
           [5, 5, 5, 5, 6, 6], [2] * 16, 6100.55, 1.29, 14.28, 7385.62),
    "20b": (24, 21.6445625, 81.780875, 44.2925, 86.264, 2.25,
            [4, 5, 5, 5, 5], [1] * 24, 7282.81, 3.30, 13.98, 8999.25),
    "32b": (64, 40.5610625, 91.17429688, 54.928, 108.294, 4.0,
            [2, 2] + [3] * 20, [1] * 64, 23978.83, 2.65, 6.67, 25927.57),
    "235b": (94, 43.016, 58.376, 42.444, 43.294, 3.2,
             [2] * 47, [1] * 94, 28250.03, 0.98, 3.29, 28575.71),
}


def inputs(tmp, name):
    layers, fwd, bwd, hfwd, hbwd, hop = MODELS[name][:6]
    shape = shapes.Shape(layers, HIDDEN, 1, 1, HIDDEN, HIDDEN, 8, False,
                         False)
    graph = Path(tmp) / f"{name}.mlir"
    graph.write_text(shapes.build(shape, 1, SEQ, "f16"))
    act = SEQ * HIDDEN * 2
    gbps = act / (hop / 2 * 1e-3) / 1e9
    hw = Path(tmp) / f"{name}.hw.json"
    hw.write_text(json.dumps({
        "name": f"roundpipe-{name}",
        "description": "RoundPipe's simulator: a hop is one activation down "
                       "and up; no optimizer time",
        "tflops": {"f32": 100, "f16": 100, "bf16": 100},
        "compute_efficiency": 1, "memory_gbps": 1000,
        "memory_efficiency": 1, "memory_gib": 24,
        "h2d_gbps": gbps, "d2h_gbps": gbps, "gpus_per_link": 1,
        "launch_us": 0, "optimizer_gbps": 1e9}))
    measured = Path(tmp) / f"{name}.times.json"
    times = [{"name": "embed", "forward_ms": 0, "backward_ms": 0}]
    times += [{"name": f"layers.{i}", "forward_ms": fwd, "backward_ms": bwd}
              for i in range(layers)]
    times.append({"name": "head", "forward_ms": hfwd, "backward_ms": hbwd})
    # RoundPipe's layer times are read around torch.autograd.backward,
    # whose AccumulateGrad nodes add each microbatch's weight gradients
    # (roundpipe/run.py, run_backward): the adds are in its backward, so
    # rp's add-grads programs take no time of their own (docs/sim.md), as
    # in bench/paper_gap.py and bench/claims.py.
    measured.write_text(json.dumps({"backward_includes_accumulation": True,
                                    "layers": times}))
    return graph, hw, measured


def roundpipe_stages(name):
    """RoundPipe's partition in rp's --stages form: the embedding joins the
    first forward and the shallowest backward stage, the head is the
    tail."""
    fwd, bwd = MODELS[name][6:8]
    fwd = [fwd[0] + 1] + fwd[1:]
    bwd = bwd[:-1] + [bwd[-1] + 1]
    return ("fwd:" + ",".join(map(str, fwd)) + ";bwd:1," +
            ",".join(map(str, bwd)))


def timing(graph, hw, measured, stages=None, tail_jobs=1):
    opts = (f"hw={hw} measured={measured} devices={G} microbatches={M} "
            f"tail-jobs={tail_jobs}")
    if stages:
        opts += f" stages={stages}"
    start = time.perf_counter()
    r = subprocess.run([RP_OPT, str(graph), f"-rp-print-partition={opts}",
                        "-o", os.devnull], capture_output=True, text=True)
    took = time.perf_counter() - start
    if r.returncode:
        raise SystemExit(f"rp-opt failed:\n{r.stderr}")
    found = dict(re.findall(r"(\w+)=([0-9.e+-]+)", r.stdout.split(
        "timing ")[1].splitlines()[0]))
    found["stages"] = re.search(r"^stages=(\S+)", r.stdout, re.M).group(1)
    if "one_step_ms" not in found:  # an rp-opt older than the steady state
        found.update(one_step_ms=found["step_ms"], step_ms="nan",
                     bubble_pct=found["bubble_pct"], busy_ratio="nan")
    return {k: (float(v) if k != "stages" else v) for k, v in found.items()}, took


def simulate(tmp, graph, hw, measured, stages=None, schedule="round-robin",
             tail_jobs=1):
    """One step alone on the sim device, timed with the measured times."""
    plan = Path(tmp) / "plan.rpplan"
    subprocess.run([str(BIN / "rp-compile"), str(graph), "-o", str(plan),
                    "--devices", str(G), "--microbatches", str(M), "--hw",
                    str(hw), "--measured", str(measured), "--schedule",
                    schedule, "--dtype", "f16", "--tail-jobs",
                    str(tail_jobs)] +
                   (["--stages", stages] if stages else []),
                   capture_output=True, text=True, check=True)
    figures = {}
    for mode in ("--sync", "--async"):
        out = subprocess.run([str(BIN / "rp-run"), str(plan), "--backend",
                              "sim", mode, "--measured", str(measured),
                              # RoundPipe's simulator has no loss scaling;
                              # rp's scale is not yet one step stale, so
                              # an f16 plan that scales keeps one pass in
                              # flight (docs/sim.md).
                              "--no-loss-scaling"],
                             capture_output=True, text=True,
                             check=True).stdout
        figures[mode] = {k: float(v) for k, v in
                         (l.split() for l in out.splitlines() if " " in l)}
    # One step alone (the sync pass's jobs, as RoundPipe's simulator times
    # an iteration), and the continuous async run's steady step and bubble.
    return (figures["--sync"]["jobs_ms"], figures["--async"]["step_ms"],
            figures["--async"]["steady_bubble_pct"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--no-search", dest="search", action="store_false",
                        help="only RoundPipe's partition (rp's partitioner "
                             "takes a minute on the large models)")
    args = parser.parse_args()
    print(f"{G} GPUs, {M} microbatches; RoundPipe: its simulator's "
          f"single-iteration makespan and async bubble (pp-simulate/log)")
    print(f"{'model':6s} {'RoundPipe: one step, steady, async bubble':>42s} "
          f"| {'rp':30s} {'one step':>18s} {'steady step':>26s} "
          f"{'busy max/min':>12s} {'sim':>8s}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            graph, hw, measured = inputs(tmp, name)
            span, bubble, sync = MODELS[name][8:11]
            steady = span * (1 - sync / 100) / (1 - bubble / 100)
            rows = [("RoundPipe's partition", roundpipe_stages(name), 1)]
            if args.search:
                rows.append(("rp's partitioner", None, 1))
                rows.append(("rp, tail-jobs=0", None, 0))
            for label, stages, tail_jobs in rows:
                t, took = timing(graph, hw, measured, stages, tail_jobs)
                one = t["one_step_ms"]
                jobs = int(t.get("tail_jobs", 1))
                sim, sim_steady, sim_bubble = simulate(
                    tmp, graph, hw, measured, t["stages"], tail_jobs=jobs)
                print(f"{name:6s} {span:9.0f} ms {steady:9.0f} ms "
                      f"{bubble:4.1f}% | "
                      f"{label:22s} ({took:4.1f} s) {one:9.0f} ms "
                      f"{100 * (one / span - 1):+5.1f}% "
                      f"{t['step_ms']:9.0f} ms "
                      f"{100 * (t['step_ms'] / steady - 1):+5.1f}% "
                      f"{t['bubble_pct']:5.1f}% "
                      f"{t['busy_ratio']:8.3f} {sim:8.0f} ms  "
                      f"{t['stages']} tail jobs {jobs}")
                print(f"{'':6s} {'':42s} | {'  sim, continuous async':22s} "
                      f"{'':8s} {'':18s} {sim_steady:9.0f} ms "
                      f"{100 * (sim_steady / steady - 1):+5.1f}% "
                      f"{sim_bubble:5.1f}% (the compiler: "
                      f"{t['step_ms']:.0f} ms, "
                      f"{100 * (sim_steady / t['step_ms'] - 1):+.1f}%)")
            if args.search:
                # The fused tail as a pair split by layers, in the
                # compiler's timing model only: plans do not run it
                # (docs/pipeline.md, "The tail as two jobs"), so there is
                # no sim figure.
                for tail_jobs, label in ((3, "rp, tail as a pair"),):
                    t, took = timing(graph, hw, measured,
                                     tail_jobs=tail_jobs)
                    print(f"{'':6s} {'':42s} | {label:22s} "
                          f"({took:4.1f} s) {t['one_step_ms']:9.0f} ms "
                          f"{100 * (t['one_step_ms'] / span - 1):+5.1f}% "
                          f"{t['step_ms']:9.0f} ms "
                          f"{100 * (t['step_ms'] / steady - 1):+5.1f}% "
                          f"{t['bubble_pct']:5.1f}% {t['busy_ratio']:8.3f} "
                          f"{'(model)':>8s}     {t['stages']} "
                          f"pair at {int(t.get('tail_pair_at', 0))}")
            # RoundPipe's strongest static baseline, one step alone (a
            # static schedule's steps end at a barrier), with rp's
            # balanced stages (floor(L / G) per device).
            looped = simulate(tmp, graph, hw, measured,
                              schedule="looped-bfs")[0]
            published = MODELS[name][11]
            print(f"{name:6s} {published:9.0f} ms {'':12s} {'':5s} | "
                  f"{'Looped-BFS':22s} {'':8s} {looped:9.0f} ms "
                  f"{100 * (looped / published - 1):+5.1f}% (RoundPipe's "
                  f"simulated Looped-BFS: {published:.0f} ms)")


if __name__ == "__main__":
    main()
