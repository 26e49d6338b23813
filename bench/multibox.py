"""Data parallelism across processes on this machine: 1 vs 2 vs 3 ranks,
side by side.

Usage: .venv/bin/python bench/multibox.py [--steps 6] [--threads 1]
                   [--baseline OTHER/build/bin] [--shard-optimizer]
                   [--async]

A GPT-2-style model exported by torch.onnx (4 layers, width 256, 3.7 M
parameters: 15 MB of f32 gradients summed per step) compiled for 2 host
devices and 2 microbatches of 4 x 128 tokens. Each rank trains its own
global batch (weak scaling: W ranks train W times the tokens of one step),
the ranks on loopback over Gloo (launch_ranks.py, torchrun's variables).
Prints, per world size, the job's tokens/s (W x a rank's tokens over the
mean step after the first, the slowest rank's) and the all-reduce's share
of a step: the trace's "all-reduce" span (from the step's first gradient
sum to its loss sum; it overlaps the pipeline) over the step time. The
machine's cores are shared by all ranks, so this measures the
communicator's overhead, not the scaling of separate boxes (the sim's
prediction in docs/multi-box.md is for those). --baseline runs another
build's rp-run and rp-compile (say, main's) beside this one's, alternating
per world size, so that the two are measured under the same load.
Each run also gives its largest rank's peak RSS (host memory per box)
and what a rank sent through its collectives per step (rp-run's count of
payload bytes: what crosses the network from a box);
--shard-optimizer runs the ranks with a sharded optimizer (ZeRO-1);
--async runs them in async mode (the default is --sync).
"""

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
from forward_vs_ort import export  # noqa: E402


RSS_WRAPPER = """
import os, subprocess, sys
p = subprocess.Popen(sys.argv[1:])
_, status, usage = os.wait4(p.pid, 0)
print(f"peak rss {usage.ru_maxrss} KiB", file=sys.stderr)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--baseline", type=Path, default=None)
    parser.add_argument("--shard-optimizer", action="store_true")
    parser.add_argument("--async", dest="run_async", action="store_true")
    args = parser.parse_args()
    builds = [("this", ROOT / "build/bin")]
    if args.baseline:
        builds.insert(0, ("baseline", args.baseline))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        export(tmp / "gpt.onnx", 4, 256, 128, 4, vocab=4096,
               return_model=True)
        tokens_per_rank = 2 * 4 * 128
        base = {}
        print(f"steps={args.steps} threads/rank={args.threads}, "
              f"{tokens_per_rank} tokens per rank per step")
        for world in (1, 2, 3):
            for name, bin_dir in builds:
                plan = tmp / f"{name}.rpplan"
                if not plan.exists():
                    subprocess.run([str(bin_dir / "rp-compile"),
                                    str(tmp / "gpt.onnx"), "-o", str(plan),
                                    "--devices", "2", "--microbatches", "2"],
                                   check=True, capture_output=True)
                mean, share, rss, sent = measure(tmp, bin_dir, plan, world,
                                                 args)
                tps = world * tokens_per_rank / (mean / 1e3)
                base.setdefault(name, tps)
                print(f"  {name:8s} {world} rank(s): mean step {mean:8.1f} "
                      f"ms, {tps:8.0f} tokens/s ({tps / base[name]:.2f}x of "
                      f"1 rank), all-reduce {share * 100:5.1f}% of a step, "
                      f"peak RSS {rss / 1024:6.1f} MiB, sent "
                      f"{sent:6.2f} MiB a step per rank")


def measure(tmp, bin_dir, plan, world, args):
    """One run at `world` ranks: the mean step (ms, the slowest rank's) and
    the all-reduce span's share of it, and the largest rank's peak RSS
    (KiB, from wait4), and the most a rank sent a step (MiB)."""
    launch = ROOT / "test/Runtime/Inputs/launch_ranks.py"
    out = tmp / f"w{world}"
    trace_path = tmp / f"w{world}.trace.json"
    cmd = [str(bin_dir / "rp-run"), str(plan), "--steps",
           str(args.steps), "--threads", str(args.threads),
           "--watchdog-ms", "120000", "--trace", str(trace_path)]
    if not args.run_async:
        cmd.append("--sync")
    if args.shard_optimizer:
        cmd.append("--shard-optimizer")
    # Each rank's peak RSS, from its parent's wait4, on its stderr.
    cmd = [sys.executable, "-c", RSS_WRAPPER] + cmd
    if world == 1:
        errs = [subprocess.run(cmd, check=True, capture_output=True,
                               text=True).stderr]
    else:
        # Rank 0's trace at the name given (the others' beside it).
        subprocess.run([sys.executable, str(launch), str(world), str(out),
                        "--"] + cmd, check=True, capture_output=True)
        errs = [open(f"{out}.{r}.err").read() for r in range(world)]
    mean = max(float(re.search(r"mean ([0-9.]+) ms after the first",
                               e).group(1)) for e in errs)
    rss = max(int(re.search(r"^peak rss (\d+) KiB$", e, re.M).group(1))
              for e in errs)
    # Builds before the count print none.
    sent = max([float(m.group(1)) for e in errs
                for m in [re.search(r"\(([0-9.]+) MiB a step\)", e)] if m]
               or [0.0])
    share = 0.0
    if world > 1:
        trace = json.load(open(trace_path))
        events = trace["traceEvents"] if isinstance(trace, dict) else trace
        spans = [e["dur"] / 1e3 for e in events
                 if e.get("name") == "all-reduce" and "dur" in e]
        if spans:
            share = sum(spans[1:]) / max(len(spans) - 1, 1) / mean
    return mean, share, rss, sent

if __name__ == "__main__":
    main()
