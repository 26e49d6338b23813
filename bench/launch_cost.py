"""The executor's cost per kernel launch and per job, measured from rp-run
on the host backend or, on a GPU box, the cuda backend (issue 32: the
profiles' `launch_us` and `job_us` rows), beside the baselines that say
whether the figures hold.

Usage: python3 bench/launch_cost.py [--backend host|cuda] [--plan FILE]
           [--bin DIR] [--hw PROFILE] [--steps 40] [--repeats 3]
           [--json FILE]
       python3 bench/launch_cost.py --write-plan DIR

A tiny Qwen3-shaped graph (4 layers, hidden 32, 16 tokens: every kernel's
arithmetic is well under a microsecond) is compiled for 2 devices,
round-robin, 8 microbatches, layer-grain recompute, stages fwd:3;bwd:3,3
(`--write-plan` writes
it for a box without rp-compile: scripts/gpu-prepare.sh), and trained with
`rp-run --backend B --init-weights random --trace --profile`. Then:

- launches per program: the same plan on the sim with a profile where only
  a launch costs (1 us, kernels and copies free): each run job's span is
  its program's launches as the cuda device makes them
  (timing::kernelLaunches: a norm gradient with parameter gradients
  three, a concat one per input), read from the binary, not mirrored here;
- per launch: each run job's span against its program's launches (and,
  for the host backend, against its kernel calls, which is what its
  thread dispatches), over the decoder layers' forward, recompute and
  backward programs (the tail's tiny head included), fitted by least squares, span = a + b x launches; b
  is the profile's `launch_us` (the timing core charges it per launch, in
  series), a what running a program costs beyond them;
- per job: how long after the last job it waits on (another thread's
  event) a job starts, where that job and not its own queue held it back
  (`handoff_us`, the profile's `job_us`); and the gap between two jobs
  queued back to back on one queue (`back_to_back_us`, not charged).

Side by side, the baselines: `rp-bench-executor`'s microseconds per command
through the executor's queues, events and threads and through one thread
with the same dispatch (where built); and the prediction the figures feed,
the sim's step for this plan on `--hw` (default: host; cuda: h100) with the
measured `launch_us` and `job_us` put in, against the step the run took
(its trace's "jobs ran" figure). On the host backend the devices are
threads on the machine's cores, beside the trainer and the optimizer: the
run's CPU time per step (`cpu_ms_per_step`, every thread, start-up
included) against the sim's busy time summed over the devices
(`predicted_busy_sum_ms`, what one core would run in series) says
whether the model's work per step is the run's. `predicted_step_ms`
puts the devices' compute, the trainer and the optimizer on this
machine's cores (`host_cores` "machine": `machine_cores`); on a machine shared with other work the run
gets fewer: `run_cores` (its steady CPU time per step,
`steady_cpu_ms_per_step`, from a second run of twice the steps, over its
step) and
`predicted_step_run_cores_ms`, the sim's step with `host_cores` at those,
against `measured_step_ms` (`predicted_over_measured_run_cores`). Prints
one `key value` line per figure (medians over the repeats) and with
`--json` writes them.
"""

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROFILES = ROOT / "profiles"
# The tiny plan's stages, fixed: the partitioner's choice on this tiny
# graph moves with the cost model (one stage of everything with a
# reshape's copy charged), and the fit needs programs of several sizes.
STAGES = "fwd:3;bwd:3,3"
# Only a launch costs: the sim's span of a run job is its launches in us.
COUNTING = {"name": "count-launches",
            "tflops": {t: 1e9 for t in ("f64", "f32", "f16", "bf16")},
            "memory_gbps": 1e12, "h2d_gbps": 1e12, "d2h_gbps": 1e12,
            "launch_us": 1, "job_us": 0, "optimizer_gbps": 1e12}


def fit(points):
    """Least squares y = a + b x over [(x, y)]."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        sys.exit("launch_cost: every program has as many launches: no fit")
    b = sum((x - mx) * (y - my) for x, y in points) / sxx
    return my - b * mx, b


def rp_run(bin_dir, *args):
    r = subprocess.run([str(bin_dir / "rp-run"), *map(str, args)],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"launch_cost: rp-run {' '.join(map(str, args))} failed:\n"
                 + r.stderr[-2000:])
    return r


def write_plan(bin_dir, out):
    """The tiny plan, compiled for the host profile, at out/tiny.rpplan."""
    sys.path.insert(0, str(ROOT / "python"))
    from rp import shapes  # noqa: E402
    out.mkdir(parents=True, exist_ok=True)
    graph = out / "tiny.mlir"
    graph.write_text(shapes.build(
        shapes.Shape(4, 32, 2, 1, 16, 64, 256, False, True), 1, 16, "f32"))
    plan = out / "tiny.rpplan"
    r = subprocess.run([str(bin_dir / "rp-compile"), str(graph), "-o",
                        str(plan), "--devices", "2", "--microbatches", "8",
                        "--hw", "host", "--recompute", "layer",
                        "--stages", STAGES],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit("launch_cost: rp-compile failed:\n" + r.stderr[-2000:])
    return plan


def spans_of(trace):
    """The run and copy jobs' spans past the first step."""
    return [e for e in json.loads(trace.read_text())["traceEvents"]
            if e.get("ph") == "X" and e.get("cat") in ("compute", "copy")
            and e["args"].get("step", 0) > 0 and "job" in e["args"]]


def launches_per_program(bin_dir, plan, tmp):
    """Program name -> launches, from the sim's trace on COUNTING."""
    profile = Path(tmp) / "count.json"
    profile.write_text(json.dumps(COUNTING))
    trace = Path(tmp) / "count-trace.json"
    rp_run(bin_dir, plan, "--backend", "sim", "--hw", profile, "--trace",
           trace)
    out = {}
    for e in json.loads(trace.read_text())["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "compute" and \
                "program" in e.get("args", {}):
            out[e["args"]["program"]] = round(e["dur"])
    return out


def is_layer(program):
    """A program of decoder layers (not the embedding's gather, nor the
    gradient accumulators' copies and adds)."""
    return program.startswith("layers.")


def measure(bin_dir, backend, plan, desc, launches, steps, tmp):
    calls = {p["name"]: len(p.get("calls", [])) for p in desc["programs"]}
    trace = Path(tmp) / "t.json"
    prof = Path(tmp) / "p.json"
    for f in (trace, prof):
        f.unlink(missing_ok=True)
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = rp_run(bin_dir, plan, "--backend", backend, "--init-weights",
               "random:1", "--steps", steps, "--trace", trace, "--profile",
               prof)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_ms = 1e3 * (after.ru_utime + after.ru_stime - used.ru_utime
                    - used.ru_stime)
    ran = re.search(r"whose jobs ran ([0-9.]+) ms each", r.stderr)
    spans = spans_of(trace)
    layer = [e for e in spans if is_layer(e["args"].get("program", ""))]
    per_launch = fit([(launches[e["args"]["program"]], e["dur"])
                      for e in layer])
    per_call = fit([(calls[e["args"]["program"]], e["dur"]) for e in layer])
    # Per job: how long after the last job it waits on ends (its event
    # recorded, on another thread) a job starts, where that job, not its
    # own queue, held it back: the executor's event and thread hand-off.
    at = {(e["args"]["job"], e["args"]["step"]): e for e in spans}
    recorder = {}
    for i, j in enumerate(desc["jobs"]):
        for ev in j.get("records", []):
            recorder.setdefault(ev, i)
    queue_end = {}
    handoff = set()
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
        handoff.add(id(e))
    handoffs = [e["handoff"] for e in spans if id(e) in handoff]
    back = []
    for key in {(e["pid"], e["tid"]) for e in spans}:
        q = sorted((e for e in spans if (e["pid"], e["tid"]) == key),
                   key=lambda e: e["ts"])
        back += [y["ts"] - x["ts"] - x["dur"] for x, y in zip(q, q[1:])
                 if id(y) not in handoff]
    layers = json.loads(prof.read_text())["layers"]
    fwd = statistics.median(l["forward_ms"] for l in layers
                            if l["name"].startswith("layers."))
    return {"launch_us": per_launch[1], "program_us": per_launch[0],
            "call_us": per_call[1],
            "handoff_us": statistics.median(handoffs) if handoffs else 0.0,
            "back_to_back_us": statistics.median(
                [g for g in back if g >= 0] or [0.0]),
            "profile_layer_forward_ms": fwd,
            "measured_step_ms": float(ran.group(1)) if ran else float("nan"),
            # Every thread's CPU time over the run (its start-up included,
            # so an upper bound) per step: on the host backend the
            # devices' jobs, the trainer and the optimizer share the
            # machine's cores, so a step takes at least this over the
            # cores the run gets.
            "cpu_ms_per_step": cpu_ms / steps,
            # The steady CPU time per step (the run again with twice the
            # steps, the start-up differenced away) and the cores the run
            # got while stepping: that over its step. The machine's own
            # count is the profile's default; one shared with other work
            # leaves a run fewer.
            **steady_cpu(bin_dir, backend, plan, steps, cpu_ms,
                         float(ran.group(1)) if ran else float("nan")),
            "fit_spans": len(layer), "handoffs": len(handoffs)}


def steady_cpu(bin_dir, backend, plan, steps, cpu_ms, step_ms):
    """The CPU time a step takes once started (a run of 2 x `steps`
    against the first's `cpu_ms`) and the cores that makes of `step_ms`."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = rp_run(bin_dir, plan, "--backend", backend, "--init-weights",
               "random:1", "--steps", 2 * steps)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu2 = 1e3 * (after.ru_utime + after.ru_stime - used.ru_utime
                  - used.ru_stime)
    ran = re.search(r"whose jobs ran ([0-9.]+) ms each", r.stderr)
    step2 = float(ran.group(1)) if ran else float("nan")
    per_step = (cpu2 - cpu_ms) / steps
    return {"steady_cpu_ms_per_step": per_step,
            "run_cores": per_step / statistics.mean([step_ms, step2])}


def bench_executor(bin_dir):
    """rp-bench-executor's us per command: executor, one thread."""
    tool = bin_dir / "rp-bench-executor"
    if not tool.exists():
        return {}
    r = subprocess.run([str(tool)], capture_output=True, text=True)
    ex = re.search(r"executor: ([0-9.]+) us per command", r.stdout)
    one = re.search(r"one thread, same dispatch: ([0-9.]+) us", r.stdout)
    if r.returncode or not ex or not one:
        return {}
    return {"executor_us_per_command": float(ex.group(1)),
            "one_thread_us_per_command": float(one.group(1))}


def predicted_step(bin_dir, plan, hw, launch_us, job_us, tmp, cores=None):
    """The sim's step for `plan` on `hw` with the measured costs put in,
    its devices on `cores` of the host's (default: this machine's)."""
    path = Path(hw)
    if not path.exists():
        path = PROFILES / f"{hw}.json"
    profile = json.loads(path.read_text())
    profile.pop("unknown", None)
    profile.pop("as_built_kernels", None)
    profile["launch_us"], profile["job_us"] = launch_us, job_us
    profile["host_cores"] = "machine" if cores is None else cores
    measured = Path(tmp) / "measured-hw.json"
    measured.write_text(json.dumps(profile))
    out = rp_run(bin_dir, plan, "--backend", "sim", "--hw", measured).stdout
    step = re.search(r"^step_ms ([0-9.e+-]+)$", out, re.M)
    jobs = re.search(r"^jobs_ms ([0-9.e+-]+)$", out, re.M)
    # Each device its own processor: the sim's busy time summed over the
    # devices is the work one core would run in series.
    busy = sum(float(v) for v in re.findall(
        r"^device[0-9]+_busy_ms ([0-9.e+-]+)$", out, re.M))
    return (float(step.group(1)) if step else float("nan"),
            float(jobs.group(1)) if jobs else float("nan"), busy)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("host", "cuda"), default="host")
    parser.add_argument("--plan", type=Path,
                        help="a compiled tiny plan (--write-plan's); "
                             "default: compile it here")
    parser.add_argument("--bin", type=Path, default=Path(
        os.environ.get("RP_BIN", ROOT / "build/bin")))
    parser.add_argument("--hw", help="the profile the prediction is made on "
                        "(default: host; cuda: h100)")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--write-plan", type=Path, metavar="DIR")
    args = parser.parse_args()
    if args.steps < 2 or args.repeats < 1:
        sys.exit("launch_cost: --steps must be at least 2, --repeats 1")
    if args.write_plan:
        print(write_plan(args.bin, args.write_plan))
        return
    hw = args.hw or ("host" if args.backend == "host" else "h100")
    with tempfile.TemporaryDirectory() as tmp:
        plan = args.plan or write_plan(args.bin, Path(tmp))
        if not plan.exists():
            sys.exit(f"launch_cost: no plan {plan}")
        desc = json.loads(rp_run(args.bin, plan, "--describe=json").stdout)
        launches = launches_per_program(args.bin, plan, tmp)
        runs = [measure(args.bin, args.backend, plan, desc, launches,
                        args.steps, tmp) for _ in range(args.repeats)]
        fig = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        fig["backend"] = args.backend
        fig["job_us"] = fig["handoff_us"]
        fig.update(bench_executor(args.bin))
        fig["hw"] = hw
        (fig["predicted_step_ms"], fig["predicted_jobs_ms"],
         fig["predicted_busy_sum_ms"]) = predicted_step(
            args.bin, plan, hw, fig["launch_us"], fig["job_us"], tmp)
        if args.backend == "host":
            # The profile's cores are the machine's; on a machine shared
            # with other work the run gets fewer: the step predicted at
            # those.
            fig["machine_cores"] = len(os.sched_getaffinity(0))
            fig["predicted_step_run_cores_ms"] = predicted_step(
                args.bin, plan, hw, fig["launch_us"], fig["job_us"], tmp,
                fig["run_cores"])[0]
            fig["predicted_over_measured_run_cores"] = (
                fig["predicted_step_run_cores_ms"] / fig["measured_step_ms"])
    for k, v in fig.items():
        print(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(fig, indent=1) + "\n")


if __name__ == "__main__":
    main()
