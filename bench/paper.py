"""RoundPipe's published 8x RTX 4090 figures next to rp's predictions, each
with its range.

Usage: python3 bench/paper.py [--models qwen3-1.7b,...] [--no-held-out]
                              [--schedules round-robin,1f1b,...]
                              [--no-max-seq] [--no-seq-table] [--only-memory]
                              [--only-roundpipe-model]

For Qwen3-1.7B, Llama-3.1-8B, Qwen3-32B and the mixture-of-experts
GPT-OSS-20B and Qwen3-235B-A22B (weightless f16 graphs from rp.shapes,
sequence 2048; the 235B with LoRA r=32, alpha 16 on every linear layer but
the LM head, experts and routers included: PEFT's all-linear, as RoundPipe
ran it) it prints, in this order (issue 32):

1. Held out: RoundPipe's measured 1-GPU tokens/s against rp's model given
   RoundPipe's own kernel times (rp-compile --devices 1 --measured, 4 x
   2048-token microbatches) on the corrected rtx4090 profile, the host in
   the middle of its range; for each model the kernels-only rate, what the
   host costs in rp's model, and what is left over; for the two MoE
   models the model of RoundPipe term by term (its pageable weights, then
   its expert loop's host work per routing, moe_host_us, at both ends of
   bench/moe_host.py's measured range), kept apart from the model of rp.
2. The model of RoundPipe at 8 GPUs on the sim (roundpipe_model): its
   kernel times and partition (ROUNDPIPE_STAGES where rp's RoundPipe
   partitioner cuts otherwise) at its global batch, its host
   (claims.roundpipe_host: one interpreter for every GPU's dispatch work,
   host_interpreters 1; for the MoE models pageable weights and its
   expert loop's host work per routing), rp's host unknowns at their ends;
   RoundPipe's measured figure inside or outside that range, the model's
   1 -> 8 GPU scaling, and what paces its step at mid (the host optimizer,
   the interpreter or the GPUs).
3. Two tables, "rp as built today" (rtx4090:as-built: the cuda device's
   CUDA-core attention and MoE weight gradient) and "rp with library
   kernels" (rtx4090): per model, the round-robin plan at RoundPipe's
   global batch exactly (batching(): RoundPipe's 10 uneven microbatches
   become 16 (20B: 32) even ones), timed on the sim (async, continuous)
   with the host at the ends and middle of what the card's datasheet does
   not say (bench/claims.py: host DRAM 100-300 GB/s, 4 or 1 GPUs per PCIe
   uplink, the optimizer at 30-100 GB/s); RoundPipe's published figure;
   the kernel-only ideal (RoundPipe's simulator on its measured kernel
   times, bench/roundpipe_sim.py's inputs: what a model without the host
   predicts); the claim, "ahead" only where the whole range is ahead
   ("would be ahead" in the library table: kernels rp does not run yet);
   how busy host DRAM and the busiest uplink are; and the ratio to
   RoundPipe at mid split into per-GPU rate x 8-GPU scaling (split()).
   Under a row that says "ahead", what it rests on (claims.claim: rp's
   host model at the slow end of its range). Under each table, what each
   row's scaling rests on (rests_on()): rp's 1 -> 8 GPU scaling is the
   kernel-only ideal's, RoundPipe's measured one is less, and the model of
   RoundPipe (2.) says whether its host accounts for the gap and what
   paces it.
4. With --schedules, the older comparison: each schedule on the library
   profile without the host (M = 10 microbatches of round(batch / (M x
   accumulation)) sequences), and the ratio split into per-GPU rate x
   8-GPU scaling.
Then the largest sequence length whose round-robin plan fits 24 GB
(rp-compile --report-max-seq on a 3000-token graph), next to RoundPipe's,
with what limits it, and the same with the 3000-token graph's stages kept;
and for Qwen3-1.7B RoundPipe's sequence-length table with rp's prediction
beside it (--no-max-seq, --no-seq-table skip them; --only-memory runs only
the max-sequence rows).
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

sys.path.insert(0, str(ROOT / "bench"))
import claims  # noqa: E402

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
# The host's time in RoundPipe's MoE expert loop per MoE layer and routing
# (bench/moe_host.py, claims.py). The model of RoundPipe charges it per
# routing (moe_host_us) in the held-out breakdown and at 8 GPUs
# (roundpipe_model) only: rp's own MoE kernels read no counts back and
# loop over no experts, so no profile of rp's sets it.
MOE_HOST_US = claims.MOE_HOST_US


def split(tps, bubble_pct, name):
    """rp's ratio to RoundPipe split into (rate per busy GPU) x (scaling
    from 1 to 8 GPUs): rp's rate per busy GPU is its tokens/s over the
    GPUs' busy share (8 x (1 - steady bubble)), RoundPipe's is its measured
    1-GPU rate; the scalings are 8-GPU tokens/s over those rates."""
    per_gpu = tps / (G * (1 - bubble_pct / 100))
    one, eight = ONE_GPU[name], PUBLISHED[name][0]
    return per_gpu / one, (tps / per_gpu) / (eight / one), tps / eight


# The largest microbatch (sequences) each model's round-robin plan fits
# 24 GB with; batching() picks the largest divisor of a pass's sequences
# up to it, so every row trains RoundPipe's global batch exactly.
MAX_MICROBATCH = {"qwen3-1.7b": 13, "llama-3.1-8b": 13, "qwen3-32b": 6,
                  "gpt-oss-20b": 4, "qwen3-235b-a22b": 6}
HW = {"rp as built today": "rtx4090:as-built",
      "rp with library kernels": "rtx4090"}


def batching(name):
    """(sequences per microbatch, microbatches per pass, passes per step)
    with exactly RoundPipe's global batch (RoundPipe's 10 microbatches of
    12.8 sequences are uneven; rp's are not)."""
    batch, passes = RUNS[name]
    per_pass = batch // passes
    b = max(d for d in range(1, MAX_MICROBATCH[name] + 1)
            if per_pass % d == 0)
    return b, per_pass // b, passes


def profile_json(hw):
    """The profile `hw` names (NAME or NAME:as-built) as a dict, with its
    as-built kernels applied as rp's loader applies them."""
    name, _, form = hw.partition(":")
    p = json.loads((ROOT / "profiles" / f"{name}.json").read_text())
    built = p.get("as_built_kernels", {})
    if form == "as-built":
        p["kernels"] = {**p.get("kernels", {}), **built}
        p["name"] = hw
    return p


def compile_plan(graph, plan, schedule, m=M, extra=(), hw="rtx4090"):
    """Compiles with rp-compile's default recompute grain (`--recompute
    auto`: chosen per backward stage by rp-choose-recompute); the grain it
    chose comes back from its summary."""
    micro = m if schedule != "interleaved-1f1b" else -(-m // G) * G
    start = time.perf_counter()
    r = subprocess.run([str(BIN / "rp-compile"), str(graph), "-o",
                        str(plan), "--devices", str(G), "--microbatches",
                        str(micro), "--hw", hw, "--dtype", "f16",
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


def simulate(plan, sync, passes, hw=None, measured=None):
    r = subprocess.run([str(BIN / "rp-run"), str(plan), "--backend", "sim",
                        "--accumulate", str(passes)]
                       + (["--sync"] if sync else [])
                       + (["--hw", str(hw)] if hw else [])
                       + (["--measured", str(measured)] if measured else []),
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


def graph_for(name, tmp, b):
    graph = Path(tmp) / f"{name}.b{b}.mlir"
    if not graph.exists():
        graph.write_text(shapes.build(shapes.SHAPES[name], b, 2048, "f16"))
    return graph


def held_out(models, tmp):
    """RoundPipe's measured 1-GPU tokens/s against rp's model given
    RoundPipe's kernel times (--measured, 4 x 2048-token microbatches, 10 per
    pass) on the corrected rtx4090 profile with the host in the middle of
    its range: the compute model checked before any 8-GPU claim."""
    print("\nheld out: 1 GPU, RoundPipe's kernel times (rp-compile --devices 1"
          " --measured), rtx4090 with the host at 'mid'")
    print("model           measured  rp  rp/measured  kernels only  host "
          "(copies, optimizer, dispatch)  left over")
    base = profile_json("rtx4090")
    variants = dict(claims.host_variants(base, tmp, "heldout"))
    breakdown = []
    for name in models:
        batch, passes = RUNS[name]
        graph = graph_for(name, tmp, 4)
        times = claims.measured_times(name, Path(tmp) / f"{name}.times.json")
        plan = Path(tmp) / f"{name}.1gpu.rpplan"
        extra = LORA.get(name, []) + THROUGHPUT_FLAGS.get(name, [])
        r = subprocess.run([str(BIN / "rp-compile"), str(graph), "-o",
                            str(plan), "--devices", "1", "--microbatches",
                            str(M), "--hw", str(variants["mid"]), "--dtype",
                            "f16", "--measured", str(times),
                            # RoundPipe's partition: its 1-GPU run
                            # recomputes every layer but the head, and so
                            # do its kernel times; rp's own partitioner
                            # keeps a long fused tail on one GPU instead
                            # (no recompute there: 1.7B 10,322 tokens/s).
                            "--partitioner", "roundpipe", *extra],
                           capture_output=True, text=True)
        if r.returncode:
            print(f"{name:15s} does not compile: "
                  f"{r.stderr.strip().splitlines()[-1:]}")
            continue
        tps = simulate(plan, False, passes, variants["mid"],
                       times)["tokens_per_s"]
        one = ONE_GPU[name]
        kernels = claims.one_gpu_kernels(name)
        host = 1 - tps / kernels
        left = tps / one - 1
        dense = name not in ("gpt-oss-20b", "qwen3-235b-a22b")
        print(f"{name:15s} {one:8,} {tps:6.0f} {tps / one:9.2f}  "
              f"{kernels:10.0f}  {host * 100:+6.1f}% of the kernels' rate"
              f"{'':14s}{left * 100:+6.1f}%"
              + ("  (within 10 %)" if dense and abs(left) <= 0.10 else
                 "  (dense: OUTSIDE 10 %)" if dense else "  (MoE)"))
        if not dense:
            breakdown.append((name, kernels, tps, moe_terms(
                name, plan, passes, variants["mid"], times, tmp)))
    if breakdown:
        moe_breakdown(breakdown)


def moe_terms(name, plan, passes, mid, times, tmp):
    """The held-out MoE plan on the sim with RoundPipe's host terms added
    one by one to rp's host at mid (the model of RoundPipe, not of rp):
    its pageable weights (pin_model="off"), then its expert loop's host
    work per routing (moe_host_us) at both ends of bench/moe_host.py's
    range."""
    p = json.loads(Path(mid).read_text())
    p["pinned"] = False
    out = {}
    for label, us in (("pageable", 0), ("loop low", MOE_HOST_US[name][0]),
                      ("loop high", MOE_HOST_US[name][1])):
        p["moe_host_us"] = us
        path = Path(tmp) / f"{name}.{label.replace(' ', '-')}.json"
        path.write_text(json.dumps(p))
        out[label] = simulate(plan, False, passes, path,
                              times)["tokens_per_s"]
    return out


def moe_breakdown(rows):
    """Where RoundPipe's measured 1-GPU rate goes, term by term."""
    print("\nMoE held out, the model of RoundPipe term by term (tokens/s, "
          "each term added to those before it; bench/moe_host.py for the "
          "expert loop)")
    print("model            kernels  + rp's host  + pageable  + expert loop "
          "(one expert - whole loop)  measured  left over")
    for name, kernels, host, t in rows:
        one = ONE_GPU[name]
        lo, hi = t["loop high"], t["loop low"]
        left = (f"{(one / hi - 1) * 100:+.1f}% - {(one / lo - 1) * 100:+.1f}%"
                if one < lo or one > hi else "inside the range")
        print(f"{name:16s} {kernels:7.0f}  {host:11.0f}  {t['pageable']:10.0f}"
              f"  {hi:12.0f} - {lo:7.0f}{'':13s}{one:8,}  {left}")


# The model of RoundPipe's stages where rp's RoundPipe partitioner
# (--partitioner roundpipe) cuts them otherwise than RoundPipe's published
# partition (reference/roundpipe.md §6), with the device memory to compile
# them against: for GPT-OSS-20B it cuts 7 forward stages, 32 stage jobs a
# pass, a multiple of 8, so every pass puts each job on the same GPU and
# the one that takes the LM head and three backward stages paces the rest
# (busiest over idlest GPU 1.42, 17,142 tokens/s at mid); RoundPipe's
# 4,5,5,5,5 | 0,1x24 (embedding with its first layer: 26 layers here) has
# 30, which its dispatch counter moves 6 GPUs a pass (1.03). Its 5-layer
# forward stages hold 8.2 GB of f16 weights, over rp's per-stage cap on 24
# GiB (0.6 of it, halved): the model is of time, so it compiles on 28.
ROUNDPIPE_STAGES = {
    "gpt-oss-20b": ("fwd:5,5,5,5,5;bwd:1," + ",".join(["1"] * 23) + ",2",
                    28),
}


def roundpipe_model(models, tmp):
    """The model of RoundPipe at 8 GPUs, on the sim (issue 32): its own
    kernel times (--measured, 4 x 2048-token microbatches, so its global
    batch in per-pass / 4 microbatches), its partitioner, and its host
    (claims.roundpipe_host): every GPU's dispatch work on one Python
    interpreter (host_interpreters 1: the sim shares it between the GPUs'
    expert loops, interpreter_busy_pct), for the MoE models its pageable
    weights and its expert loop's host work per routing; rp's host unknowns
    at their ends. Returns {name: {end: sim figures}}: "low" (slow host,
    the whole loop), "mid" (one expert), "mid-whole", "high"."""
    base = profile_json("rtx4090")
    out = {}
    print("\nthe model of RoundPipe, 8 GPUs (sim: its kernel times, its "
          "partition, one interpreter for every GPU's dispatch, MoE: "
          "pageable weights and its expert loop's host work; rp's host "
          "unknowns at their ends)")
    print("model            b x M x K   model tok/s low - high (mid; mid, "
          "whole loop)   RoundPipe  measured in range  1->8 GPU: model / "
          "measured  at mid paced by")
    for name in models:
        batch, passes = RUNS[name]
        m = batch // passes // 4
        graph = graph_for(name, tmp, 4)
        times = claims.measured_times(name, Path(tmp) / f"{name}.times.json")
        extra = LORA.get(name, []) + THROUGHPUT_FLAGS.get(name, [])
        paths = {}
        ends = ["low", "mid", "high"] + (["mid-whole"] if name in MOE_HOST_US
                                         else [])
        fields = dict(claims.host_ends(base))
        for end in ends:
            p = json.loads(json.dumps(base))
            p.pop("unknown", None)
            p["name"] = f"roundpipe-{end}"
            p.update(claims.roundpipe_host(fields[end.split("-")[0]], end,
                                           name))
            if name in ROUNDPIPE_STAGES:
                p["memory_gib"] = ROUNDPIPE_STAGES[name][1]
            paths[end] = Path(tmp) / f"{name}.roundpipe.{end}.json"
            paths[end].write_text(json.dumps(p))
        plan = Path(tmp) / f"{name}.roundpipe8.rpplan"
        r = subprocess.run([str(BIN / "rp-compile"), str(graph), "-o",
                            str(plan), "--devices", str(G), "--microbatches",
                            str(m), "--hw", str(paths["mid"]), "--dtype",
                            "f16", "--measured", str(times),
                            *(["--stages", ROUNDPIPE_STAGES[name][0]]
                              if name in ROUNDPIPE_STAGES else
                              ["--partitioner", "roundpipe"]), *extra],
                           capture_output=True, text=True)
        if r.returncode:
            print(f"{name:16s} does not compile: "
                  f"{r.stderr.strip().splitlines()[-1:]}")
            continue
        figs = {end: simulate(plan, False, passes, paths[end], times)
                for end in ends}
        if figs["mid"]["optimizer_ms"] >= 0.5 * figs["mid"]["step_ms"]:
            # Whether the update paces the step: mid with it untimed.
            p = json.loads(paths["mid"].read_text())
            p["optimizer_gbps"] = 0
            untimed = Path(tmp) / f"{name}.roundpipe.untimed.json"
            untimed.write_text(json.dumps(p))
            figs["mid"]["untimed_optimizer_tokens_per_s"] = simulate(
                plan, False, passes, untimed, times)["tokens_per_s"]
        out[name] = figs
        lo, mid, hi = (figs[e]["tokens_per_s"] for e in ("low", "mid", "high"))
        whole = (f"; {figs['mid-whole']['tokens_per_s']:,.0f}"
                 if "mid-whole" in figs else "")
        pub = PUBLISHED[name][0]
        inside = "inside" if lo <= pub <= hi else (
            f"OUTSIDE ({(pub / (hi if pub > hi else lo) - 1) * 100:+.1f}%)")
        print(f"{name:16s} 4 x {m:2d} x {passes}  {lo:9,.0f} - {hi:7,.0f} "
              f"({mid:,.0f}{whole}){'':6s}{pub:9,}  {inside:17s}  "
              f"{mid / ONE_GPU[name]:5.2f} / "
              f"{pub / ONE_GPU[name]:4.2f}{'':14s}{paced_by(figs['mid'])}")
    return out


def paced_by(sim):
    """What paces a steady step of the sim's figures `sim`: the host
    optimizer where the step is faster with it untimed (roundpipe_model
    times that where the update is half the step or more), the interpreter
    where it is busy nearly all the time, else the GPUs (their bubble)."""
    step, opt = sim["step_ms"], sim.get("optimizer_ms", 0)
    untimed = sim.get("untimed_optimizer_tokens_per_s", 0)
    if untimed > 1.02 * sim["tokens_per_s"]:
        return (f"the host optimizer (its {opt:,.0f} ms update beside a "
                f"{step:,.0f} ms step; untimed, {untimed:,.0f} tokens/s)")
    busy = sim.get("interpreter_busy_pct", 0)
    if busy >= 80:
        return f"the one interpreter ({busy:.0f} % busy)"
    return (f"the GPUs ({sim['steady_bubble_pct']:.1f} % bubble; the "
            f"interpreter {busy:.0f} % busy, the optimizer {opt:,.0f} of "
            f"{step:,.0f} ms)")


def claims_tables(models, tmp, model_rp=None):
    """Per model and kernel implementation, rp's prediction as a range
    over the host (claims.HOST_ENDS), beside RoundPipe's figure and the
    kernel-only ideal; "ahead" only where the whole range is."""
    rows = {label: [] for label in HW}
    for name in models:
        b, m, passes = batching(name)
        graph = graph_for(name, tmp, b)
        extra = LORA.get(name, []) + THROUGHPUT_FLAGS.get(name, [])
        for label, hw in HW.items():
            plan = Path(tmp) / f"{name}.{hw.replace(':', '-')}.rpplan"
            compiled, took, error = compile_plan(graph, plan, "round-robin",
                                                 m, extra, hw)
            if compiled is None:
                rows[label].append((name, b, m, passes, None, error))
                continue
            figures = {}
            for end, path in claims.host_variants(profile_json(hw), tmp,
                                                  f"{name}.{label[3:8]}"):
                sim = simulate(plan, False, passes, path)
                figures[end] = sim
            rows[label].append((name, b, m, passes, figures, ""))
    for label, table in rows.items():
        print(f"\n{label} ({HW[label]}), 8 GPUs, async, RoundPipe's global "
              f"batch; host {claims.assumptions()}")
        print("model            batch (b x M x K)  rp tok/s low - high (mid)"
              "      RoundPipe  kernel-only ideal  claim            "
              "host DRAM / busiest uplink busy (mid)  per-GPU rate x "
              "scaling = ratio (mid)")
        for name, b, m, passes, figures, error in table:
            pub = PUBLISHED[name][0]
            ideal = claims.kernel_ideal(name)
            if figures is None:
                print(f"{name:16s} {b:3d} x {m:2d} x {passes}  does not "
                      f"compile: {error}")
                continue
            lo, mid, hi = (figures[e]["tokens_per_s"]
                           for e in ("low", "mid", "high"))
            uplinks = [v for k, v in figures["mid"].items()
                       if k.startswith("uplink")]
            print(f"{name:16s} {b:3d} x {m:2d} x {passes}  "
                  f"{lo:9.0f} - {hi:7.0f} ({mid:7.0f})  {pub:9,}  "
                  f"{ideal:17.0f}  "
                  f"{claims.verdict(lo, hi, pub, HW[label] == 'rtx4090'):16s} "
                  f"{figures['mid'].get('host_dram_busy_pct', 0):4.0f}% / "
                  f"{max(uplinks or [0]):3.0f}%{'':24s}"
                  "{:.2f} x {:.2f} = {:.2f}".format(*split(
                      mid, figures["mid"]["steady_bubble_pct"], name)))
            said = claims.claim(lo, hi, pub, HW[label] == "rtx4090",
                                AHEAD_BASIS + claims.assumptions().split(
                                    "; mid")[0])
            if "ahead" in said:
                print(f"{'':16s} {said}")
        rests_on(table, model_rp or {})


# What an "ahead" rests on beyond the host's low end (claims.claim).
AHEAD_BASIS = ("rp's host model (no host loop over experts: grouped kernels "
               "with the counts on the device; a CUDA launch and hand-off no "
               "GPU run has measured) at the slow end of its range, ")


def rests_on(table, model_rp):
    """What each row's 8-GPU scaling rests on: rp's (its busy share at
    mid) is the kernel-only ideal's, RoundPipe's measured one is less; the
    model of RoundPipe on the sim (roundpipe_model: its kernel times, its
    partition, one interpreter, its MoE host terms) says whether the host
    accounts for the gap, and what paces its step at mid."""
    print("  what the scaling rests on (mid): rp's 1 -> 8 GPU scaling, the "
          "kernel-only ideal's, RoundPipe's measured (8-GPU / 1-GPU "
          "tokens/s); the model of RoundPipe's 8 GPUs (sim)")
    for name, b, m, passes, figures, error in table:
        if figures is None:
            continue
        mid = figures["mid"]
        rp_scaling = G * (1 - mid["steady_bubble_pct"] / 100)
        theirs = PUBLISHED[name][0] / ONE_GPU[name]
        line = (f"  {name:16s} rp {rp_scaling:4.2f}, ideal "
                f"{claims.ideal_scaling(name):4.2f}, RoundPipe {theirs:4.2f}")
        pub = PUBLISHED[name][0]
        model = model_rp.get(name)
        if model:
            lo, hi = (model[e]["tokens_per_s"] for e in ("low", "high"))
            scale = model["mid"]["tokens_per_s"] / ONE_GPU[name]
            line += (f"; the model of RoundPipe {lo:,.0f} - {hi:,.0f} "
                     f"tokens/s ({scale:4.2f} x its 1-GPU), its measured "
                     f"{pub:,} " + ("inside" if lo <= pub <= hi else
                                    "OUTSIDE: a gap no term explains")
                     + f"; paced by {paced_by(model['mid'])}")
        elif theirs < 0.9 * claims.ideal_scaling(name):
            line += "; RoundPipe's gap to the ideal is not in rp's model"
        print(line)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(RUNS))
    parser.add_argument("--no-max-seq", dest="max_seq", action="store_false")
    parser.add_argument("--no-seq-table", dest="seq_table",
                        action="store_false")
    parser.add_argument("--only-memory", action="store_true",
                        help="only the max-sequence rows")
    parser.add_argument("--schedules", default="",
                        help="also the older per-schedule comparison on the "
                        "library profile without the host: "
                        + ",".join(SCHEDULES))
    parser.add_argument("--no-held-out", dest="held_out",
                        action="store_false")
    parser.add_argument("--only-roundpipe-model", action="store_true",
                        help="only the model of RoundPipe at 8 GPUs")
    args = parser.parse_args()
    if args.only_memory:
        memory_rows(args.models.split(","))
        return
    if args.only_roundpipe_model:
        with tempfile.TemporaryDirectory() as tmp:
            roundpipe_model(args.models.split(","), tmp)
        return
    print(f"8 x rtx4090 (profiles/rtx4090.json), f16, sequence 2048, "
          f"{M} microbatches per pass (20B: 32 of 4 sequences); tokens/s per "
          f"optimizer "
          f"step")
    summary = []
    models = args.models.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        if args.held_out:
            held_out(models, tmp)
        model_rp = roundpipe_model(models, tmp)
        claims_tables(models, tmp, model_rp)
        for name in (models if args.schedules else []):
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
                if not schedule:
                    continue
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
    if not summary:
        if args.max_seq:
            memory_rows(models)
        return
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
