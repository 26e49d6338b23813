"""Token slices (issue 35, TeraPipe inside the round-robin): one long
sequence cut into slices, sliced plan against the unsliced one.

Usage: python3 bench/token_slices.py [--models qwen3-1.7b,llama-3.1-8b]
                                     [--seqs 16384,32768,65536,131072]
                                     [--no-max-seq] [--no-sim]
                                     [--max-seq-models ...]

For each model and sequence (8 x rtx4090, f16, one sequence per step,
async, steps back to back) it compiles `--token-slices auto` for real
(rp-compile writes the sliced plan) and prints the slices chosen, the
stages it chose with them (searched again with the slices where rp's
partitioner cut them), the compiler's predicted tokens/s and bubble
sliced and unsliced (its steady state), then both plans run on the sim (`rp-run --backend sim`): the
sliced plan rp-compile wrote and the unsliced plan compiled without the
flag, where each compiles. Then, for the paper models, the longest
sequence with slices (`--report-max-seq --token-slices auto`, the
3000-token graph's stages; the memory model's bisection) beside today's
(rp's stages at each length) and RoundPipe's.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
from rp import shapes  # noqa: E402

BIN = Path(os.environ.get("RP_BIN", ROOT / "build/bin"))
G = 8
# reference/roundpipe.md §6: Qwen3-1.7B tokens/s by sequence length (many
# sequences per step, layer grain at 32k and 64k) and max sequence on 24 GB.
ROUNDPIPE_SEQ = {16384: 45390, 32768: 33723, 65536: 23734}
ROUNDPIPE_MAX = {"qwen3-1.7b": 73000, "llama-3.1-8b": 49000,
                 "gpt-oss-20b": 39000, "qwen3-32b": 28000,
                 "qwen3-235b-a22b": 31000}
LORA = {"qwen3-235b-a22b": ["--lora-rank", "32", "--lora-alpha", "16"]}

SLICED = re.compile(
    r"token slices \(a prediction[^)]*\): (\d+) slices? of ([\d,]+) tokens "
    r"\(([^)]*)\).*?predicted step ([\d.]+) ms, (\d+)% bubble, (\d+) "
    r"tokens/s(?: \([^)]*\))?; unsliced ([\d.]+) ms, (\d+)% bubble, (\d+) "
    r"tokens/s.*?"
    r"peak ([\d.]+ GiB) on device \d+ of [\d.]+ GiB \((fits|does NOT fit); "
    r"unsliced ([\d.]+ GiB)")


# The search starts from the unsliced plan's stages, or (the tail as two
# jobs) from the stages one tail job's search chose: the remark says which.
STAGES = re.compile(
    r"stages chosen with the slices: (\S+), predicted step ([\d.]+) ms; "
    r"the (unsliced plan's|one-tail-job) stages (\S+) (?:would take "
    r"([\d.]+) ms|do not "
    r"fit) with \d+ slices \((\d+) partitions timed\)")
KEPT = re.compile(r"the (unsliced plan's|one-tail-job) stages (\S+) kept: "
                  r"none faster "
                  r"with the slices among the (\d+) partitions timed")
START = {"unsliced plan's": "the unsliced plan's stages",
         "one-tail-job": "one tail job's stages (timed as 2 tail jobs)"}


def stages_said(err):
    """What rp-compile said of the stages it chose with the slices."""
    m = STAGES.search(err)
    if m:
        before = (f"{m.group(5)} ms" if m.group(5) else "does not fit")
        return (f"stages chosen with the slices {m.group(1)} ({m.group(2)} "
                f"ms; {START[m.group(3)]} {m.group(4)}: {before}; "
                f"{m.group(6)} timed)")
    m = KEPT.search(err)
    if m:
        return (f"{START[m.group(1)]} {m.group(2)} kept ({m.group(3)}"
                f" timed)")
    return "stages not searched"


def compile_sliced(graph, extra=()):
    r = subprocess.run([str(BIN / "rp-compile"), str(graph), "-o",
                        str(graph) + ".rpplan", "--devices", str(G),
                        "--microbatches", "1", "--hw", "rtx4090", "--dtype",
                        "f16", "--token-slices", "auto", *extra],
                       capture_output=True, text=True)
    return r.stderr


def sim(plan):
    """(tokens/s, steady bubble %, step ms) of `plan` on the sim."""
    r = subprocess.run([str(BIN / "rp-run"), str(plan), "--backend", "sim",
                        "--steps", "8"], capture_output=True, text=True)
    if r.returncode:
        return None
    out = dict(l.split() for l in r.stdout.splitlines() if len(l.split()) == 2)
    return (float(out["tokens_per_s"]), float(out["steady_bubble_pct"]),
            float(out["step_ms"]))


def sim_unsliced(graph):
    """The unsliced plan compiled for real and run on the sim, or the
    reason it does not compile."""
    plan = str(graph) + ".plain.rpplan"
    c = subprocess.run([str(BIN / "rp-compile"), str(graph), "-o", plan,
                        "--devices", str(G), "--microbatches", "1", "--hw",
                        "rtx4090", "--dtype", "f16"],
                       capture_output=True, text=True)
    if c.returncode:
        lines = [l for l in c.stderr.splitlines() if "error" in l]
        return None, re.sub(r"^.*?error: ", "", (lines or ["?"])[0])[:80]
    return sim(plan), ""


def throughput(models, seqs, tmp, with_sim=True):
    print("token slices, 8 x rtx4090, f16, one sequence per step (batch 1, "
          "1 microbatch), async, steps back to back; rp-compile "
          "--token-slices auto writes the sliced plan, both plans run on "
          "the sim:")
    print("model         seq     slices (auto)                  predicted: "
          "sliced tok/s bubble | unsliced tok/s bubble | x     | peak sliced"
          " / unsliced | sim: sliced plan tok/s bubble (vs predicted) | "
          "unsliced plan | x on the sim | RoundPipe (many seqs)")
    for name in models:
        for seq in seqs:
            graph = Path(tmp) / f"{name}.{seq}.mlir"
            graph.write_text(shapes.build(shapes.SHAPES[name], 1, seq, "f16"))
            err = compile_sliced(graph)
            m = SLICED.search(err)
            if not m:
                lines = [l for l in err.splitlines() if "error" in l]
                print(f"{name:13s} {seq:6d}  no prediction: "
                      f"{(lines or ['?'])[0][:120]}")
                continue
            k, sizes, how = m.group(1), m.group(2), m.group(3)
            s_tps, s_b = int(m.group(6)), int(m.group(5))
            u_tps, u_b = int(m.group(9)), int(m.group(8))
            plan = Path(str(graph) + ".rpplan")
            sliced = sim(plan) if with_sim and plan.exists() else None
            plain, why = (sim_unsliced(graph) if with_sim
                          else (None, "not run"))
            s_text = (f"{sliced[0]:8.0f} {sliced[1]:3.0f}% "
                      f"({sliced[0] / s_tps - 1:+.1%})" if sliced
                      else "(no plan)" if with_sim else "(not run)")
            u_text = (f"{plain[0]:7.0f} {plain[1]:3.0f}%" if plain
                      else f"({why})")
            ratio = (f"{sliced[0] / plain[0]:4.2f}x" if sliced and plain
                     else "-")
            shown = sizes if len(sizes) <= 30 else sizes[:27] + "..."
            print(f"{name:13s} {seq:6d}  {k:>2s}: {shown:30s} {s_tps:8d} "
                  f"{s_b:3d}%   | {u_tps:8d} {u_b:3d}%        | "
                  f"{s_tps / max(u_tps, 1):4.2f}x | {m.group(10)} / "
                  f"{m.group(12)}{'' if m.group(11) == 'fits' else ' OVER'}"
                  f" | {s_text} | {u_text} | {ratio} | "
                  f"{ROUNDPIPE_SEQ.get(seq, '-') if name == 'qwen3-1.7b' else '-'}"
                  f"   [{how}]", flush=True)
            print(f"{'':21s}{stages_said(err)}", flush=True)


def max_seq(models, tmp):
    print("\nmax sequence on 24 GB (8 x rtx4090, f16, one sequence per "
          "microbatch, stage grain; from a 3000-token graph). With slices: "
          "the memory model's bisection, the 3000-token graph's stages (not "
          "re-cut per length):")
    print("model              today (rp's stages)  with slices  "
          "RoundPipe  slices at the answer  host memory there (no "
          "host bound)")
    for name in models:
        graph = Path(tmp) / f"{name}.seq.mlir"
        graph.write_text(shapes.build(shapes.SHAPES[name], 1, 3000, "f16"))
        err = compile_sliced(graph, ["--report-max-seq", "--recompute",
                                     "stage", *LORA.get(name, [])])
        today = re.search(r"the largest sequence that fits is (\d+) tokens",
                          err)
        sliced = re.search(r"with token slices \(a prediction[^)]*\) the "
                           r"largest sequence that fits is (\d+) tokens.*?, "
                           r"in (\d+) slices from (\d+) down to (\d+)", err)
        if not sliced:
            lines = [re.sub(r"^.*?remark: ", "", l) for l in err.splitlines()
                     if "no largest sequence reported" in l] or \
                [l for l in err.splitlines() if "error" in l]
            print(f"{name:18s} {today.group(1) if today else '?':>10s}  "
                  f"no sliced figure: {(lines or ['?'])[0][:120]}")
            continue
        host = re.search(r"the host holds about ([\d.]+ [GMK]iB) there "
                         r"\(base, adapters and optimizer ([\d.]+ [GMK]iB), "
                         r"every layer's kept keys and values ([\d.]+ "
                         r"[GMK]iB), activation rows ([\d.]+ [GMK]iB)",
                         err)
        print(f"{name:18s} {int(today.group(1)) if today else 0:10,}  "
              f"{int(sliced.group(1)):14,}  {ROUNDPIPE_MAX[name]:9,}  "
              f"{sliced.group(2)} slices, {sliced.group(3)} down to "
              f"{sliced.group(4)} tokens  "
              + (f"{host.group(1)} (weights and optimizer {host.group(2)}, "
                 f"kept keys {host.group(3)}, activation rows {host.group(4)})"
                 if host else "?"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="qwen3-1.7b,llama-3.1-8b")
    parser.add_argument("--seqs", default="16384,32768,65536,131072")
    parser.add_argument("--no-max-seq", dest="max_seq", action="store_false")
    parser.add_argument("--no-sim", dest="sim", action="store_false",
                        help="leave out the sim's columns")
    parser.add_argument("--max-seq-models", default=",".join(ROUNDPIPE_MAX))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        throughput(args.models.split(","),
                   [int(s) for s in args.seqs.split(",")], tmp, args.sim)
        if args.max_seq:
            max_seq(args.max_seq_models.split(","), tmp)


if __name__ == "__main__":
    main()
