"""bench/paper.py's sequence rows: the largest sequence length whose
round-robin plan fits 24 GB (rp-compile --report-max-seq), next to
RoundPipe's, and Qwen3-1.7B's tokens/s at RoundPipe's sequence lengths.
Each model's (or length's) compiles are one task on paper_common.POOL.
"""

import re
import tempfile
from pathlib import Path

from paper_common import (BIN, G, LORA, M, POOL, PUBLISHED, RUNS,
                          compile_plan, run_cached, shapes, simulate,
                          write_text)

# reference/roundpipe.md §6, Qwen3-1.7B on 8 x 4090.
SEQ_TABLE = {512: 68102, 1024: 67783, 2048: 65417, 4096: 60929,
             8192: 54610, 16384: 45390, 32768: 33723, 65536: 23734}


def seq_row(seq, per_mb, passes, tmp):
    b = max(1, round(per_mb / seq))
    graph = write_text(Path(tmp) / f"seq{seq}.mlir", shapes.build(
        shapes.SHAPES["qwen3-1.7b"], b, seq, "f16"))
    plan = Path(tmp) / f"seq{seq}.rpplan"
    compiled, _, error = compile_plan(graph, plan, "round-robin")
    if compiled is None:
        return b, None, error
    return b, compiled, simulate(plan, False, passes)["tokens_per_s"]


def seq_table(tmp):
    """rp's predicted tokens/s for Qwen3-1.7B at RoundPipe's sequence
    lengths, next to the published figures."""
    batch, passes = RUNS["qwen3-1.7b"]
    per_mb = round(batch / (M * passes)) * 2048
    rows = {seq: POOL.submit(seq_row, seq, per_mb, passes, tmp)
            for seq in SEQ_TABLE}
    print(f"\nqwen3-1.7b sequence length (round-robin async, {M} microbatches "
          f"of about {per_mb} tokens, {passes} passes per step):")
    print("  seq     rp tok/s  published  rp/published  grain  peak")
    for seq, published in SEQ_TABLE.items():
        b, compiled, tps = rows[seq].result()
        if compiled is None:
            print(f"  {seq:6d}  does not fit: {tps}  (published "
                  f"{published:,})")
            continue
        peaks, micro, grain, _ = compiled
        print(f"  {seq:6d} {tps:10.0f} {published:10,} {tps / published:12.2f}"
              f"  {grain:5s}  {b} x {seq}, peak {peaks}")


def max_seq(name, tmp, extra=(), built=3000):
    """rp-compile --report-max-seq on a `built`-token graph. Without
    --stages in `extra` (the user's path) each length is tried with the
    stages rp's partitioner cuts for it, and the remark names those it cuts
    at the answer. Returns (tokens, grain, seconds, limit, remark, stages
    at the answer or None, layers, stages of the built graph)."""
    path = write_text(Path(tmp) / f"{name}.seq.mlir", shapes.build(
        shapes.SHAPES[name], 1, built, "f16"))
    plan = Path(tmp) / f"{name}.seq.rpplan"
    r = run_cached([BIN / "rp-compile", path, "-o", plan, "--devices",
                    str(G), "--hw", "rtx4090", "--dtype", "f16",
                    "--report-max-seq", "--recompute", "stage", *extra],
                   [plan])
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
    return (seq, grain, r.seconds, why,
            re.search(r"remark: (.*)", r.stderr),
            cut.group(1) if cut else None,
            int(stages.group(1)) if stages else None,
            stages.group(2) if stages else None)


def fits_at(name, tmp, extra, seq, stages, grain):
    """Whether a graph of `seq` tokens compiles (rp-compile exits 0: its
    memory plan fits 24 GB) with `stages` and `grain`, or, with `stages`
    None, with the stages rp-compile cuts by itself. Returns (fits, the
    stages compiled)."""
    path = write_text(Path(tmp) / f"{name}.check.mlir", shapes.build(
        shapes.SHAPES[name], 1, seq, "f16"))
    flags = ["--recompute", "layer" if grain == "layer" else "stage"]
    if stages:
        flags += ["--stages", stages]
    plan = Path(tmp) / f"{name}.check.rpplan"
    c = run_cached([BIN / "rp-compile", path, "-o", plan, "--devices",
                    str(G), "--hw", "rtx4090", "--dtype", "f16", *flags,
                    *extra], [plan])
    cut = re.search(r"layers in stages (fwd:\S+;bwd:\S+) \(", c.stderr)
    return c.returncode == 0, cut.group(1) if cut else None


def memory_row(name, tmp):
    """One model's max-sequence rows: rp's own stages at each length (and
    that answer compiled for real), then the 3000-token graph's stages
    kept (in a folder of its own: its graph has the same name)."""
    extra = LORA.get(name, [])
    found = max_seq(name, tmp, extra)
    seq, built = found[0], found[7]
    fits = fits_at(name, tmp, extra, seq, None, "stage") if seq else None
    kept = None
    if built:
        sub = Path(tmp) / f"{name}.kept"
        sub.mkdir(exist_ok=True)
        kept = max_seq(name, sub, [*extra, "--stages", built])
    return found, fits, kept


def memory_rows(models, tmp=None):
    """The largest sequence per model whose round-robin plan fits 24 GB,
    next to RoundPipe's, and what limits it: rp's own stages at each
    length (the user's path), each answer compiled for real with the
    stages rp-compile cuts by itself; then the 3000-token graph's stages
    kept at every length, for comparison."""
    if tmp is None:
        with tempfile.TemporaryDirectory() as tmp:
            return memory_rows(models, tmp)
    rows = [(name, POOL.submit(memory_row, name, tmp)) for name in models]
    print("\nmax sequence on 24 GB (8 x rtx4090, one sequence per "
          "microbatch, round-robin, stage grain), rp's partitioner at each "
          "length (rp-compile --report-max-seq, no --stages):")
    print("model             rp tokens  RoundPipe  rp/RoundPipe  report  "
          "limited by")
    fixed = []
    for name, row in rows:
        found, fitted, kept = row.result()
        seq, _, took, why, remark, cut, _, _ = found
        pub = PUBLISHED[name][4]
        if not seq:
            print(f"{name:16s} {'?':>10s} {pub:10,}  "
                  f"({remark.group(1) if remark else 'no report'})")
            continue
        fits, compiled = fitted
        print(f"{name:16s} {seq:10,} {pub:10,} {seq / pub:13.2f} "
              f"{took:6.1f}s  {why}; compiled at {seq:,}: "
              f"{'fits' if fits else 'DOES NOT FIT'}"
              f"{'' if compiled == cut else ', OTHER STAGES'}; stages "
              f"'{(cut or '?')[:60]}...'")
        if kept:
            fixed.append((name, pub, *kept[:4]))
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
