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
   models the model of RoundPipe term by term (its weights' pinning, the
   235B's pageable, then its expert loop's host work per routing,
   moe_host_us, at both ends of bench/moe_host.py's measured range), kept
   apart from the model of rp; then where the 20B's difference goes,
   term by term with each term's source (paper_gap.py).
2. The model of RoundPipe at 8 GPUs on the sim (roundpipe_model): its
   kernel times and partition (ROUNDPIPE_STAGES where rp's RoundPipe
   partitioner cuts otherwise) at its global batch, its host
   (claims.roundpipe_host: one interpreter for every GPU's dispatch work,
   host_interpreters 1; the 235B's pageable weights; for the MoE models
   its expert loop's host work per routing), rp's host unknowns at their
   ends;
   at the fast end its runs' kernel speed (its measured 1-GPU rate over
   rp's model of that run, paper_roundpipe.kernel_speed); RoundPipe's
   measured figure inside or outside that range, the model's 1 -> 8 GPU
   scaling, and what paces its step at mid (the host optimizer, the
   interpreter or the GPUs).
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

The parts live in modules of their own: paper_common.py (RoundPipe's
figures, batching, the compile and sim calls through a cache and a pool:
RP_PAPER_CACHE, RP_PAPER_JOBS), paper_roundpipe.py (1. and 2.),
paper_gap.py (the 20B's held-out difference term by term) and
paper_memory.py (the sequence rows); this file prints 3. and 4.
"""

import argparse
import tempfile
from pathlib import Path

import claims
# What bench/explain.py and bench/lora_quant.py read through paper too.
from paper_common import (  # noqa: F401
    BASELINE_BUBBLES, G, HW, LORA, M, MICROBATCHES, ONE_GPU, POOL, PUBLISHED,
    RUNS, SCHEDULES, THROUGHPUT_FLAGS, batching, compile_plan, graph_for,
    profile_json, shapes, simulate, split, write_text)
from paper_memory import (  # noqa: F401
    SEQ_TABLE, fits_at, max_seq, memory_rows, seq_table)
from paper_roundpipe import (  # noqa: F401
    MOE_HOST_US, ROUNDPIPE_STAGES, gap, held_out, held_out_row, model_range,
    paced_by, roundpipe_model, roundpipe_row)


def claims_row(name, label, tmp):
    """One model's row of one table: its plan for the table's kernels,
    timed on the sim at the host's ends."""
    hw = HW[label]
    b, m, passes = batching(name)
    graph = graph_for(name, tmp, b)
    extra = LORA.get(name, []) + THROUGHPUT_FLAGS.get(name, [])
    plan = Path(tmp) / f"{name}.{hw.replace(':', '-')}.rpplan"
    compiled, took, error = compile_plan(graph, plan, "round-robin", m,
                                         extra, hw)
    if compiled is None:
        return (name, b, m, passes, None, error)
    figures = {}
    for end, path in claims.host_variants(profile_json(hw), tmp,
                                          f"{name}.{label[3:8]}"):
        figures[end] = simulate(plan, False, passes, path)
    return (name, b, m, passes, figures, "")


def submit_claims(models, tmp):
    return {label: [POOL.submit(claims_row, name, label, tmp)
                    for name in models] for label in HW}


def claims_tables(models, tmp, model_rp=None, rows=None):
    """Per model and kernel implementation, rp's prediction as a range
    over the host (claims.HOST_ENDS), beside RoundPipe's figure and the
    kernel-only ideal; "ahead" only where the whole range is."""
    rows = rows or submit_claims(models, tmp)
    for label, futures in rows.items():
        table = [f.result() for f in futures]
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
AHEAD_BASIS = claims.AHEAD_BASIS


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
            lo, hi = model_range(model)
            scale = model["mid"]["tokens_per_s"] / ONE_GPU[name]
            line += (f"; the model of RoundPipe {lo:,.0f} - {hi:,.0f} "
                     f"tokens/s ({scale:4.2f} x its 1-GPU), its measured "
                     f"{pub:,} {gap_note(lo, hi, pub)}"
                     f"; paced by {paced_by(model['mid'])}")
        elif theirs < 0.9 * claims.ideal_scaling(name):
            line += "; RoundPipe's gap to the ideal is not in rp's model"
        print(line)


def gap_note(lo, hi, pub):
    """What the model of RoundPipe says of a measured figure outside its
    range: which end it misses and what is left that the model does not
    time (docs/sim-roundpipe.md, "The model of RoundPipe at 8 GPUs")."""
    where = gap(lo, hi, pub)
    if where == "inside":
        return where
    if pub > hi:
        return (f"{where}: faster than the fast end (the fastest host, "
                "its kernels at its 1-GPU run's speed); no stated term "
                "closes it")
    return (f"{where}: slower than the slow end (the slowest host, its "
            "per-kernel launches on one interpreter at bench/layer_host.py's "
            "most loaded figure): no stated term closes it")


def schedule_rows(name, schedules, tmp):
    """The older comparison for one model: each schedule on the library
    profile without the host, M microbatches of round(batch / (M x
    accumulation)) sequences. Returns its summary entry."""
    batch, passes = RUNS[name]
    m = MICROBATCHES.get(name, M)
    extra = LORA.get(name, []) + THROUGHPUT_FLAGS.get(name, [])
    b = max(1, round(batch / (m * passes)))
    graph = write_text(Path(tmp) / f"{name}.mlir", shapes.build(
        shapes.SHAPES[name], b, 2048, "f16"))
    pub = PUBLISHED[name]
    print(f"\n{name}: microbatch {b} x 2048, {passes} passes of "
          f"{m} microbatches per optimizer step (RoundPipe: batch "
          f"{batch})" + (" with LoRA r=32" if name in LORA else "")
          + (" " + " ".join(THROUGHPUT_FLAGS[name])
             if name in THROUGHPUT_FLAGS else ""))
    rows = {}
    for schedule in schedules:
        plan = Path(tmp) / f"{name}.{schedule}.rpplan"
        compiled, took, error = compile_plan(graph, plan, schedule, m, extra)
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
            # The compiler's steady state of a continuous run: the K
            # passes back to back, the optimizer once per K passes beside
            # them (async).
            period = max(passes * steady[0], sim["optimizer_ms"])
            tps = passes * b * 2048 * micro / (period / 1e3)
            rows["round-robin continuous"] = (tps, steady[1])
            print(f"  {'round-robin continuous':22s} {tps:9.0f} tok/s"
                  f"  M={micro:2d} bubble {steady[1]:5.1f}% (the "
                  f"compiler's steady state: {steady[0]:.0f} ms a "
                  f"pass, {passes} passes back to back)")
    baselines = [v for k, v in rows.items()
                 if not k.startswith("round-robin")]
    rr = rows.get("round-robin async", rows.get("round-robin continuous"))
    best = max(baselines, key=lambda v: v[0]) if baselines else None
    print(f"  published: RoundPipe {pub[0]:,} tok/s async ({pub[2]}% "
          f"bubble), {pub[1]:,} sync ({pub[3]}%); simulated bubbles "
          f"1F1B/GPipe/interleaved/Looped-BFS {BASELINE_BUBBLES[name]}")
    if rr and best:
        print(f"  round-robin async / best static schedule: "
              f"{rr[0] / best[0]:.2f}x; predicted / published "
              f"RoundPipe: {rr[0] / pub[0]:.2f}")
    return name, rr, pub, rows.get("round-robin async")


def schedule_summary(summary):
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
    models = args.models.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        if args.only_memory:
            memory_rows(models, tmp)
            return
        if args.only_roundpipe_model:
            roundpipe_model(models, tmp)
            return
        print(f"8 x rtx4090 (profiles/rtx4090.json), f16, sequence 2048, "
              f"{M} microbatches per pass (20B: 32 of 4 sequences); tokens/s "
              f"per optimizer step")
        # Every section's compiles and sims start at once (the pool runs
        # as many as the machine has cores); each prints in turn.
        held = [POOL.submit(held_out_row, name, tmp) for name in models] \
            if args.held_out else None
        model = [POOL.submit(roundpipe_row, name, tmp) for name in models]
        tables = submit_claims(models, tmp)
        if held:
            held_out(models, tmp, held)
        model_rp = roundpipe_model(models, tmp, model)
        claims_tables(models, tmp, model_rp, tables)
        schedules = [s for s in args.schedules.split(",") if s]
        summary = [schedule_rows(name, schedules, tmp)
                   for name in (models if schedules else [])]
        if args.seq_table and "qwen3-1.7b" in models:
            seq_table(tmp)
        if summary:
            schedule_summary(summary)
        if args.max_seq:
            memory_rows(models, tmp)


if __name__ == "__main__":
    main()
