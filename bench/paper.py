"""RoundPipe's published 8x RTX 4090 figures next to rp's predictions.

Usage: python3 bench/paper.py [--models qwen3-1.7b,...] [--no-max-seq]
                              [--no-seq-table] [--only-memory]

For Qwen3-1.7B, Llama-3.1-8B, Qwen3-32B and the mixture-of-experts
GPT-OSS-20B and Qwen3-235B-A22B (weightless f16 graphs from rp.shapes,
sequence 2048; the 235B with LoRA r=32, alpha 16 on every linear layer
but the LM head, experts and routers included: PEFT's all-linear, as
RoundPipe ran it, and rp-add-lora's default) it compiles one training plan per schedule for
8 GPUs on the rtx4090 profile (calibrated on Qwen3-1.7B only, by
bench/calibrate.py) and times it on the sim device (rp-run --backend sim):
round-robin with rp's partitioner in async and sync mode, and the static
schedules 1F1B, GPipe, interleaved 1F1B and Looped-BFS. Microbatches and accumulation
follow RoundPipe's throughput runs (reference/roundpipe.md §6: global
batch / microbatches / accumulation steps 512/10/4, 256/10/2, 128/10/2,
and 128/16/1 for 20B, 64/10/1 for 235B): M microbatches of
round(batch / (M x accumulation)) sequences (GPT-OSS-20B: its batch of 128
in 32 microbatches of 4, unfused loss; see MICROBATCHES), and the
sim runs K = accumulation passes per optimizer step (rp-run --accumulate
K), laid out continuously as the trainer runs them (docs/sim.md; two
passes in flight, f16 loss scaling included: its scale is one step stale,
docs/pipeline.md). tokens/s and the step are
the sim's steady state; bubble % is its steady bubble, with the run's
split (fill and drain once per run) beside it. The row "round-robin continuous" is the compiler's
predicted steady state (rp-compile's one predicted step, K passes per
optimizer step) beside the sim's. Then the largest sequence length whose
round-robin plan fits 24 GB, as a user asks for it (rp-compile
--report-max-seq on a 3000-token graph, no --stages: one sequence per
microbatch, stage grain, each length tried with the stages rp's
partitioner cuts for it), next to RoundPipe's, with what limits it (the
peak device's biggest buffer) and the stages rp cuts there, each answer
compiled for real at its length with rp-compile's own stages; then the
same with the 3000-token graph's stages kept at every length (--stages;
stage grain, or layer grain where that reaches further), for comparison;
and for Qwen3-1.7B RoundPipe's sequence-length table
(tokens/s at 512 ... 64k) with rp's prediction beside it: microbatches of
about 26k tokens as at 2048 (13 sequences), one sequence from 32k on.
Every throughput plan takes rp-compile's default recompute grain
(`--recompute auto`), which the summary's grain column reports.
--only-memory skips the throughput runs.
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

BIN = Path(os.environ.get("RP_BIN", ROOT / "build/bin"))
G = 8
M = 10

# reference/roundpipe.md §6.
RUNS = {  # global batch, accumulation steps
    "qwen3-1.7b": (512, 4),
    "llama-3.1-8b": (256, 2),
    "qwen3-32b": (128, 2),
    "gpt-oss-20b": (128, 1),
    "qwen3-235b-a22b": (64, 1),
}
# The others: M. GPT-OSS-20B at RoundPipe's global batch of 128 sequences,
# but in 32 microbatches of 4 rather than its 16 of 8: 8 x 2048 tokens no
# longer fit 24 GB once the memory model counts each backward job's
# weight gradients (device 1 needs 25.5 GiB at either grain).
MICROBATCHES = {"gpt-oss-20b": 32}
# Throughput runs only (not the max sequence): GPT-OSS-20B's head is
# unfused, since its logits fit at 4 x 2048 tokens and the fused loss,
# which recomputes them in its backward, makes the tail (the head alone)
# slower per microbatch than a two-layer backward stage, which it then
# paces (docs/moe.md).
THROUGHPUT_FLAGS = {"gpt-oss-20b": ["--fuse-loss=false"]}
LORA = {"qwen3-235b-a22b": ["--lora-rank", "32", "--lora-alpha", "16"]}
PUBLISHED = {  # async tok/s, sync tok/s, async bubble, sync bubble, max seq
    "qwen3-1.7b": (65417, 56489, 4.0, 19.1, 73000),
    "llama-3.1-8b": (24275, 18888, 1.3, 14.3, 49000),
    "qwen3-32b": (5516, 4164, 2.6, 6.7, 28000),
    "gpt-oss-20b": (18122, 12549, 3.3, 14.0, 39000),
    "qwen3-235b-a22b": (1820, 1592, 1.0, 3.3, 31000),
}
BASELINE_BUBBLES = {  # RoundPipe's simulated 1F1B, GPipe, interleaved 1F1B,
    "qwen3-1.7b": (35.2, 36.1, 27.8, 25.0),  # Looped-BFS
    "llama-3.1-8b": (42.1, 42.1, 30.6, 29.2),
    "qwen3-32b": (34.9, 34.9, 15.1, 13.7),
    "gpt-oss-20b": (41.7, 41.7, 30.9, 30.4),
    "qwen3-235b-a22b": (31.2, 31.2, 6.0, 4.4),
}
SCHEDULES = ("round-robin", "1f1b", "gpipe", "interleaved-1f1b",
             "looped-bfs")
# reference/roundpipe.md §6, "Scaling from 1 to 8 RTX 4090s": measured
# tokens/s on 1 GPU (its 8-GPU figure is PUBLISHED's async one).
ONE_GPU = {"qwen3-1.7b": 8881, "llama-3.1-8b": 3142, "gpt-oss-20b": 3022,
           "qwen3-32b": 740, "qwen3-235b-a22b": 480}


def split(tps, bubble_pct, name):
    """rp's ratio to RoundPipe split into (rate per busy GPU) x (scaling
    from 1 to 8 GPUs): rp's rate per busy GPU is its tokens/s over the
    GPUs' busy share (8 x (1 - steady bubble)), RoundPipe's is its measured
    1-GPU rate; the scalings are 8-GPU tokens/s over those rates."""
    per_gpu = tps / (G * (1 - bubble_pct / 100))
    one, eight = ONE_GPU[name], PUBLISHED[name][0]
    return per_gpu / one, (tps / per_gpu) / (eight / one), tps / eight


def compile_plan(graph, plan, schedule, m=M, extra=()):
    """Compiles with rp-compile's default recompute grain (`--recompute
    auto`: chosen per backward stage by rp-choose-recompute); the grain it
    chose comes back from its summary."""
    micro = m if schedule != "interleaved-1f1b" else -(-m // G) * G
    start = time.perf_counter()
    r = subprocess.run([str(BIN / "rp-compile"), str(graph), "-o",
                        str(plan), "--devices", str(G), "--microbatches",
                        str(micro), "--hw", "rtx4090", "--dtype", "f16",
                        "--schedule", schedule, *extra],
                       capture_output=True, text=True)
    took = time.perf_counter() - start
    chosen = re.search(r"(\S+)-grain recompute", r.stderr)
    grain = chosen.group(1) if chosen else "?"
    if r.returncode:
        lines = [l for l in r.stderr.strip().splitlines() if "error" in l]
        return None, took, re.sub(r"^.*?error: ", "", (lines or ["?"])[0])
    peaks = re.search(r"peak device memory ([^;]*) of", r.stderr)
    steady = re.search(r"predicted step ([0-9.]+) ms on \S+ in the steady "
                       r"state.*?, (\d+)% bubble", r.stderr)
    return ((peaks.group(1) if peaks else "", micro, grain,
             (float(steady.group(1)), float(steady.group(2))) if steady
             else None), took, "")


def simulate(plan, sync, passes):
    r = subprocess.run([str(BIN / "rp-run"), str(plan), "--backend", "sim",
                        "--accumulate", str(passes)]
                       + (["--sync"] if sync else []),
                       capture_output=True, text=True, check=True)
    return {k: float(v) for k, v in
            (line.split() for line in r.stdout.splitlines() if " " in line)}


# reference/roundpipe.md §6, Qwen3-1.7B on 8 x 4090.
SEQ_TABLE = {512: 68102, 1024: 67783, 2048: 65417, 4096: 60929,
             8192: 54610, 16384: 45390, 32768: 33723, 65536: 23734}


def seq_table(tmp):
    """rp's predicted tokens/s for Qwen3-1.7B at RoundPipe's sequence
    lengths, next to the published figures."""
    batch, passes = RUNS["qwen3-1.7b"]
    per_mb = round(batch / (M * passes)) * 2048
    print(f"\nqwen3-1.7b sequence length (round-robin async, {M} microbatches "
          f"of about {per_mb} tokens, {passes} passes per step):")
    print("  seq     rp tok/s  published  rp/published  grain  peak")
    for seq, published in SEQ_TABLE.items():
        b = max(1, round(per_mb / seq))
        graph = Path(tmp) / f"seq{seq}.mlir"
        graph.write_text(shapes.build(shapes.SHAPES["qwen3-1.7b"], b, seq,
                                      "f16"))
        plan = Path(tmp) / f"seq{seq}.rpplan"
        compiled, _, error = compile_plan(graph, plan, "round-robin")
        if compiled is None:
            print(f"  {seq:6d}  does not fit: {error}  (published "
                  f"{published:,})")
            continue
        peaks, micro, grain, _ = compiled
        tps = simulate(plan, False, passes)["tokens_per_s"]
        print(f"  {seq:6d} {tps:10.0f} {published:10,} {tps / published:12.2f}"
              f"  {grain:5s}  {b} x {seq}, peak {peaks}")


def max_seq(name, tmp, extra=(), built=3000):
    """rp-compile --report-max-seq on a `built`-token graph. Without
    --stages in `extra` (the user's path) each length is tried with the
    stages rp's partitioner cuts for it, and the remark names those it cuts
    at the answer. Returns (tokens, grain, seconds, limit, remark, stages
    at the answer or None, layers, stages of the built graph)."""
    path = Path(tmp) / f"{name}.seq.mlir"
    path.write_text(shapes.build(shapes.SHAPES[name], 1, built, "f16"))
    start = time.perf_counter()
    r = subprocess.run([str(BIN / "rp-compile"), str(path), "-o",
                        str(Path(tmp) / "seq.rpplan"), "--devices", str(G),
                        "--hw", "rtx4090", "--dtype", "f16",
                        "--report-max-seq", "--recompute", "stage", *extra],
                       capture_output=True,
                       text=True)
    found = re.search(r"remark: .*?(\d[\d,]*) tokens", r.stderr)
    layer = re.search(r"with layer-grain recompute \(--recompute layer\) "
                      r"(\d+) tokens \((device \d+)'s biggest buffer: (.*?), "
                      r"([0-9.]+ GiB)", r.stderr)
    limit = re.search(r"(device \d+) peaks at .*? of .*?\(its biggest "
                      r"buffer: (.*?), ([0-9.]+ GiB)", r.stderr)
    cut = re.search(r"rp's partitioner cuts (\S+) there", r.stderr)
    seq = int(found.group(1).replace(",", "")) if found else None
    grain, why = "stage", ""
    if limit:
        why = f"{limit.group(1)}: {limit.group(2)} {limit.group(3)}"
    if layer and seq and int(layer.group(1)) > seq:
        seq, grain = int(layer.group(1)), "layer"
        why = f"{layer.group(2)}: {layer.group(3)} {layer.group(4)}"
    stages = re.search(r"(\d+) layers in stages (fwd:\S+;bwd:\S+) \(",
                       r.stderr)
    return (seq, grain, time.perf_counter() - start, why,
            re.search(r"remark: (.*)", r.stderr),
            cut.group(1) if cut else None,
            int(stages.group(1)) if stages else None,
            stages.group(2) if stages else None)


def fits_at(name, tmp, extra, seq, stages, grain):
    """Whether a graph of `seq` tokens compiles (rp-compile exits 0: its
    memory plan fits 24 GB) with `stages` and `grain`, or, with `stages`
    None, with the stages rp-compile cuts by itself. Returns (fits, the
    stages compiled)."""
    path = Path(tmp) / f"{name}.check.mlir"
    path.write_text(shapes.build(shapes.SHAPES[name], 1, seq, "f16"))
    flags = ["--recompute", "layer" if grain == "layer" else "stage"]
    if stages:
        flags += ["--stages", stages]
    c = subprocess.run([str(BIN / "rp-compile"), str(path), "-o",
                        str(Path(tmp) / "check.rpplan"), "--devices", str(G),
                        "--hw", "rtx4090", "--dtype", "f16", *flags, *extra],
                       capture_output=True, text=True)
    cut = re.search(r"layers in stages (fwd:\S+;bwd:\S+) \(", c.stderr)
    return c.returncode == 0, cut.group(1) if cut else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(RUNS))
    parser.add_argument("--no-max-seq", dest="max_seq", action="store_false")
    parser.add_argument("--no-seq-table", dest="seq_table",
                        action="store_false")
    parser.add_argument("--only-memory", action="store_true",
                        help="only the max-sequence rows")
    parser.add_argument("--schedules", default=",".join(SCHEDULES),
                        help="schedules to compile (default: all)")
    args = parser.parse_args()
    if args.only_memory:
        memory_rows(args.models.split(","))
        return
    print(f"8 x rtx4090 (profiles/rtx4090.json), f16, sequence 2048, "
          f"{M} microbatches per pass (20B: 32 of 4 sequences); tokens/s per "
          f"optimizer "
          f"step")
    summary = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            batch, passes = RUNS[name]
            m = MICROBATCHES.get(name, M)
            extra = LORA.get(name, []) + THROUGHPUT_FLAGS.get(name, [])
            b = max(1, round(batch / (m * passes)))
            graph = Path(tmp) / f"{name}.mlir"
            graph.write_text(shapes.build(shapes.SHAPES[name], b, 2048, "f16"))
            pub = PUBLISHED[name]
            print(f"\n{name}: microbatch {b} x 2048, {passes} passes of "
                  f"{m} microbatches per optimizer step (RoundPipe: batch "
                  f"{batch})" + (" with LoRA r=32" if name in LORA else "")
                  + (" " + " ".join(THROUGHPUT_FLAGS[name])
                     if name in THROUGHPUT_FLAGS else ""))
            rows = {}
            for schedule in args.schedules.split(","):
                plan = Path(tmp) / f"{name}.{schedule}.rpplan"
                compiled, took, error = compile_plan(graph, plan, schedule,
                                                     m, extra)
                if compiled is None:
                    print(f"  {schedule:22s} does not compile: {error}")
                    continue
                peaks, micro, grain, steady = compiled
                for sync in ((False, True) if schedule == "round-robin"
                             else (False,)):
                    sim = simulate(plan, sync, passes)
                    tps = sim["tokens_per_s"]
                    label = schedule + (" sync" if sync else
                                        " async" if schedule == "round-robin"
                                        else "")
                    rows[label] = (tps, sim["steady_bubble_pct"])
                    print(f"  {label:22s} {tps:9.0f} tok/s  M={micro:2d} bubble "
                          f"{sim['steady_bubble_pct']:5.1f}% (run "
                          f"{sim['bubble_pct']:.1f}: fill {sim['fill_pct']:.1f}"
                          f" switch {sim['switch_pct']:.1f} drain "
                          f"{sim['drain_pct']:.1f} intra {sim['intra_pct']:.1f};"
                          f" exposed comm {sim['exposed_comm_pct']:.1f})  "
                          f"step {sim['step_ms']:.0f} ms, pass "
                          f"{sim['jobs_ms']:.0f} ms, optimizer "
                          f"{sim['optimizer_ms']:.0f} ms  compile {took:.1f} s"
                          f"  {grain} grain, peak {peaks}")
                if steady:
                    # The compiler's steady state of a continuous run: the
                    # K passes back to back, the optimizer once per K
                    # passes beside them (async).
                    period = max(passes * steady[0], sim["optimizer_ms"])
                    tps = passes * b * 2048 * micro / (period / 1e3)
                    rows["round-robin continuous"] = (tps, steady[1])
                    print(f"  {'round-robin continuous':22s} {tps:9.0f} tok/s"
                          f"  M={micro:2d} bubble {steady[1]:5.1f}% (the "
                          f"compiler's steady state: {steady[0]:.0f} ms a "
                          f"pass, {passes} passes back to back)")
            baselines = [v for k, v in rows.items()
                         if not k.startswith("round-robin")]
            rr = rows.get("round-robin async",
                          rows.get("round-robin continuous"))
            best = max(baselines, key=lambda v: v[0]) if baselines else None
            print(f"  published: RoundPipe {pub[0]:,} tok/s async ({pub[2]}% "
                  f"bubble), {pub[1]:,} sync ({pub[3]}%); simulated bubbles "
                  f"1F1B/GPipe/interleaved/Looped-BFS "
                  f"{BASELINE_BUBBLES[name]}")
            if rr and best:
                print(f"  round-robin async / best static schedule: "
                      f"{rr[0] / best[0]:.2f}x; predicted / published "
                      f"RoundPipe: {rr[0] / pub[0]:.2f}")
            summary.append((name, rr, pub,
                            rows.get("round-robin async")))
        if args.seq_table and "qwen3-1.7b" in args.models.split(","):
            seq_table(tmp)
    print("\nmodel          predicted tok/s  published  error")
    for name, rr, pub, _ in summary:
        if rr:
            print(f"{name:14s} {rr[0]:15.0f} {pub[0]:10,} "
                  f"{(rr[0] / pub[0] - 1) * 100:+6.1f}%"
                  + ("" if name == "qwen3-1.7b" else "  (held out)"))
    print("\nthe ratio split: rp / RoundPipe per busy GPU (RoundPipe: its "
          "measured 1-GPU rate) x 8-GPU scaling")
    print("model           per-GPU rate  scaling  ratio")
    for name, _, _, async_row in summary:
        if async_row:
            rate, scaling, ratio = split(async_row[0], async_row[1], name)
            print(f"{name:15s} {rate:12.2f} {scaling:8.2f} {ratio:6.2f}")
    if args.max_seq:
        memory_rows(args.models.split(","))


def memory_rows(models):
    """The largest sequence per model whose round-robin plan fits 24 GB,
    next to RoundPipe's, and what limits it: rp's own stages at each
    length (the user's path), each answer compiled for real with the
    stages rp-compile cuts by itself; then the 3000-token graph's stages
    kept at every length, for comparison."""
    print("\nmax sequence on 24 GB (8 x rtx4090, one sequence per "
          "microbatch, round-robin, stage grain), rp's partitioner at each "
          "length (rp-compile --report-max-seq, no --stages):")
    print("model             rp tokens  RoundPipe  rp/RoundPipe  report  "
          "limited by")
    fixed = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in models:
            extra = LORA.get(name, [])
            seq, _, took, why, remark, cut, _, built = max_seq(name, tmp,
                                                               extra)
            pub = PUBLISHED[name][4]
            if not seq:
                print(f"{name:16s} {'?':>10s} {pub:10,}  "
                      f"({remark.group(1) if remark else 'no report'})")
                continue
            fits, compiled = fits_at(name, tmp, extra, seq, None, "stage")
            print(f"{name:16s} {seq:10,} {pub:10,} {seq / pub:13.2f} "
                  f"{took:6.1f}s  {why}; compiled at {seq:,}: "
                  f"{'fits' if fits else 'DOES NOT FIT'}"
                  f"{'' if compiled == cut else ', OTHER STAGES'}; stages "
                  f"'{(cut or '?')[:60]}...'")
            if built:
                f = max_seq(name, tmp, [*extra, "--stages", built])
                fixed.append((name, pub, f[0], f[1], f[2], f[3]))
    print("\nwith the 3000-token graph's stages at every length "
          "(--stages; stage grain, or layer grain where longer):")
    print("model             rp tokens  grain  RoundPipe  rp/RoundPipe  "
          "report  limited by")
    for name, pub, seq, grain, took, why in fixed:
        if not seq:
            print(f"{name:16s} (none fits)")
            continue
        print(f"{name:16s} {seq:10,} {grain:>6s} {pub:10,} "
              f"{seq / pub:13.2f} {took:6.1f}s  {why}")


if __name__ == "__main__":
    main()
