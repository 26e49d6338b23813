"""Every schedule side by side on the dense models of reference/models.md.

Usage: python3 bench/schedules.py [--hw rtx4090] [--devices 8]
           [--microbatches 9] [--seq 2048] [--models qwen3-1.7b,...]

For Qwen3-1.7B, Llama-3.1-8B and Qwen3-32B (weightless graphs from
rp.shapes, bf16, batch 1 x seq) compiles the training step with rp's
pipeline and prints, per schedule: the stages, the estimated step time and
bubble (the deterministic timing analysis of the lowered plan, transfers
included; the host optimizer step that ends a synchronous step is shown
apart, since async mode overlaps it with the next step), the peak device
memory per GPU from the memory plan, and how long the compile took. round-robin is compiled the way rp-compile does it
(rp-train-pipeline: partition, schedule, transfers, memory plan,
verification, autodiff), once with rp's partitioner and once with
RoundPipe's; the ratio of the two is the partitioner's gain. The static
schedules (gpipe, 1f1b, interleaved-1f1b, looped-bfs) are the baselines in their own
best setting: balanced stages bound to devices, weights resident when they
fit (their optimizer step is not timed), streamed otherwise. Last, the
largest sequence length whose round-robin plan fits every GPU
(rp-report-max-seq, with rp's stages).
"""

import argparse
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

RP_OPT = os.environ.get("RP_OPT", str(ROOT / "build/bin/rp-opt"))


def compile_step(path, passes):
    start = time.perf_counter()
    r = subprocess.run([RP_OPT, str(path)] + passes, capture_output=True,
                       text=True)
    took = time.perf_counter() - start
    if r.returncode:
        first = r.stderr.strip().splitlines()[0] if r.stderr else "failed"
        return None, took, re.sub(r"^.*?error: ", "", first)
    head = re.search(r'rp\.partition<[^>]*forward = \[([^\]]*)\], '
                     r'backward = \[([^\]]*)\]>', r.stdout)
    # The schedule's kind, devices and microbatches are the partition's
    # (rp.schedule prints its own attributes only).
    part = re.search(r'rp\.partition<schedule = "([^"]+)", devices = (\d+), '
                     r'microbatches = (\d+)', r.stdout)
    sched = re.search(r'rp\.schedule @main( resident)? attributes \{(.*?)\} \{',
                      r.stdout)
    attrs = sched.group(2)
    peaks = [int(x) for x in re.search(r"peak_bytes = array<i64: ([^>]*)>",
                                       attrs).group(1).split(", ")]
    micro = int(part.group(3))
    devices = int(part.group(2))
    opt = re.search(r"rp\.optimizer_step.*\{ms = ([0-9.eE+-]+) : f64\}",
                    r.stdout)
    row = {
        "micro": micro,
        "fwd": head.group(1).replace(" ", ""),
        "bwd": head.group(2).replace(" ", ""),
        "step_ms": float(re.search(r"step_ms = ([0-9.e+-]+)", attrs).group(1)),
        "bubble": float(re.search(r"bubble = ([0-9.e+-]+)", attrs).group(1)),
        "peaks": peaks,
        "devices": devices,
        "optimizer_ms": float(opt.group(1)) if opt else 0.0,
        "resident": sched.group(1) is not None,
    }
    return row, took, ""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hw", default="rtx4090")
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--microbatches", type=int, default=0,
                        help="0: devices + 1")
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--models", default=",".join(shapes.SHAPES))
    parser.add_argument("--no-max-seq", dest="max_seq", action="store_false",
                        help="skip rp-report-max-seq (it bisects the "
                        "sequence length: tens of seconds on 32B)")
    args = parser.parse_args()
    g = args.devices
    m = args.microbatches or g + 1
    print(f"hw={args.hw} devices={g} microbatches={m} batch=1 seq={args.seq} "
          f"dtype=bf16")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            path = Path(tmp) / f"{name}.mlir"
            path.write_text(shapes.build(shapes.SHAPES[name], 1, args.seq, "bf16"))
            print(f"{name}:")
            rows = {}
            for label, partitioner in (("round-robin (rp)", "rp"),
                                       ("round-robin (roundpipe)", "roundpipe")):
                rows[label] = compile_step(path, [
                    "--rp-train-pipeline=devices=%d microbatches=%d hw=%s "
                    "partitioner=%s" % (g, m, args.hw, partitioner),
                    ])
            for sched in ("gpipe", "1f1b", "interleaved-1f1b", "looped-bfs"):
                mb = m if sched != "interleaved-1f1b" else -(-m // g) * g
                rows[sched] = compile_step(path, [
                    "--rp-attach-loss",
                    "--rp-partition=devices=%d microbatches=%d hw=%s schedule=%s"
                    % (g, mb, args.hw, sched),
                    "--rp-lower-schedule", "--rp-insert-transfers",
                    "--rp-plan-memory"])
            for label, (row, took, error) in rows.items():
                if row is None:
                    print(f"  {label:24s} does not compile ({took:.1f} s): {error}")
                    continue
                gib = [p / 2**30 for p in row["peaks"]]
                # The optimizer step ends the synchronous step; the pipeline
                # is what comes before it (and all of a step in async mode,
                # when the optimizer is shorter).
                # Round-robin's step is the steady state of steps back to
                # back, the optimizer overlapped (its floor when it is the
                # longer): nothing to take apart.
                pipe = row["step_ms"] - (0 if label.startswith("round-robin")
                                         else row["optimizer_ms"])
                busy = (1 - row["bubble"]) * row["devices"] * row["step_ms"]
                row["pipeline_ms"] = pipe
                bubble = 1 - busy / (row["devices"] * pipe)
                print(f"  {label:24s} pipeline {pipe:7.0f} ms "
                      f"({pipe / row['micro']:6.1f} ms x {row['micro']:2d} mb)  bubble "
                      f"{100 * bubble:5.1f}%  + optimizer {row['optimizer_ms']:6.0f} ms"
                      f"  peak {max(gib):5.2f} GiB "
                      f"(min {min(gib):5.2f})  compile {took:5.1f} s  "
                      f"stages fwd:{row['fwd']};bwd:{row['bwd']}"
                      + ("  [weights resident]" if row["resident"] else ""))
            rp_row, rp_took, _ = rows["round-robin (rp)"]
            base, _, _ = rows["round-robin (roundpipe)"]
            if rp_row and base:
                print(f"  rp / roundpipe partition, estimated pipeline: "
                      f"{rp_row['pipeline_ms'] / base['pipeline_ms']:.3f}")
            if rp_row:
                print(f"  per-GPU peak (rp): "
                      + " ".join(f"{p / 2**30:.2f}" for p in rp_row["peaks"])
                      + " GiB")
            if args.max_seq:
                start = time.perf_counter()
                r = subprocess.run(
                    [RP_OPT, str(path), "--rp-attach-loss",
                     "--rp-partition=devices=%d microbatches=%d hw=%s"
                     % (g, m, args.hw), "--rp-report-max-seq",
                     "-o", os.devnull], capture_output=True, text=True)
                took = time.perf_counter() - start
                found = re.search(r"remark: (.*)", r.stderr)
                print(f"  --report-max-seq (round-robin, rp's stages, "
                      f"{took:.0f} s): "
                      + (found.group(1) if found else r.stderr.strip()))


if __name__ == "__main__":
    main()
