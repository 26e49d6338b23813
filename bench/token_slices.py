"""Token slices (issue 35, TeraPipe inside the round-robin): the compiler's
prediction of one long sequence cut into slices, beside the unsliced plan.

Usage: python3 bench/token_slices.py [--models qwen3-1.7b,llama-3.1-8b]
                                     [--seqs 16384,32768,65536,131072]
                                     [--no-max-seq] [--no-sim]
                                     [--max-seq-models ...]

Every figure here is the compiler's model of a path rp cannot execute yet:
rp-compile --token-slices predicts and then refuses (exit 1, no plan), so
no sliced figure comes from the sim or a run. For each model and sequence
(8 x rtx4090, f16, one sequence per step, async, steps back to back) it
prints the slices `--token-slices auto` picks, the predicted tokens/s and
bubble sliced and unsliced (both from the compiler's steady state, the same
model), and the sim's figure for the unsliced plan where it compiles. Then,
for the five paper models, the longest sequence with slices
(`--report-max-seq --token-slices auto`, the 3000-token graph's stages)
beside today's (rp's stages at each length) and RoundPipe's.
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


def compile_sliced(graph, extra=()):
    r = subprocess.run([str(BIN / "rp-compile"), str(graph), "-o",
                        str(graph) + ".rpplan", "--devices", str(G),
                        "--microbatches", "1", "--hw", "rtx4090", "--dtype",
                        "f16", "--token-slices", "auto", *extra],
                       capture_output=True, text=True)
    return r.stderr


def sim_unsliced(graph):
    """The unsliced plan compiled for real and run on the sim (tokens/s,
    steady bubble), or the reason it does not compile."""
    plan = str(graph) + ".plain.rpplan"
    c = subprocess.run([str(BIN / "rp-compile"), str(graph), "-o", plan,
                        "--devices", str(G), "--microbatches", "1", "--hw",
                        "rtx4090", "--dtype", "f16"],
                       capture_output=True, text=True)
    if c.returncode:
        lines = [l for l in c.stderr.splitlines() if "error" in l]
        return None, re.sub(r"^.*?error: ", "", (lines or ["?"])[0])[:80]
    r = subprocess.run([str(BIN / "rp-run"), plan, "--backend", "sim",
                        "--steps", "8"], capture_output=True, text=True)
    sim = dict(l.split() for l in r.stdout.splitlines() if " " in l)
    return (float(sim["tokens_per_s"]), float(sim["steady_bubble_pct"])), ""


def throughput(models, seqs, tmp, with_sim=True):
    print("token slices, 8 x rtx4090, f16, one sequence per step (batch 1, "
          "1 microbatch), async, steps back to back.\nTHE COMPILER'S MODEL "
          "OF A PATH rp CANNOT RUN YET (rp-compile --token-slices auto "
          "predicts, then refuses):")
    print("model         seq     slices (auto)                      sliced "
          "tok/s bubble | unsliced tok/s bubble | x     | peak sliced / "
          "unsliced | sim, unsliced plan | RoundPipe (many seqs)")
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
            # --no-sim: the unsliced plan's sim column (which no change to
            # the sliced model moves) is left out.
            sim, why = sim_unsliced(graph) if with_sim else (None, "not run")
            sim_text = (f"{sim[0]:7.0f} {sim[1]:3.0f}%" if sim
                        else f"({why})")
            shown = sizes if len(sizes) <= 30 else sizes[:27] + "..."
            print(f"{name:13s} {seq:6d}  {k:>2s}: {shown:30s} {s_tps:8d} "
                  f"{s_b:3d}%   | {u_tps:8d} {u_b:3d}%        | "
                  f"{s_tps / max(u_tps, 1):4.2f}x | {m.group(10)} / "
                  f"{m.group(12)}{'' if m.group(11) == 'fits' else ' OVER'}"
                  f" | {sim_text} | "
                  f"{ROUNDPIPE_SEQ.get(seq, '-') if name == 'qwen3-1.7b' else '-'}"
                  f"   [{how}]")


def max_seq(models, tmp):
    print("\nmax sequence on 24 GB (8 x rtx4090, f16, one sequence per "
          "microbatch, stage grain; from a 3000-token graph). With slices: "
          "THE COMPILER'S MODEL OF A PATH rp CANNOT RUN YET, the 3000-token "
          "graph's stages (not re-cut per length):")
    print("model              today (rp's stages)  with slices  "
          "RoundPipe  slices at the answer")
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
        print(f"{name:18s} {int(today.group(1)) if today else 0:10,}  "
              f"{int(sliced.group(1)):14,}  {ROUNDPIPE_MAX[name]:9,}  "
              f"{sliced.group(2)} slices, {sliced.group(3)} down to "
              f"{sliced.group(4)} tokens")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="qwen3-1.7b,llama-3.1-8b")
    parser.add_argument("--seqs", default="16384,32768,65536,131072")
    parser.add_argument("--no-max-seq", dest="max_seq", action="store_false")
    parser.add_argument("--no-sim", dest="sim", action="store_false",
                        help="leave out the unsliced plan's sim column")
    parser.add_argument("--max-seq-models", default=",".join(ROUNDPIPE_MAX))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        throughput(args.models.split(","),
                   [int(s) for s in args.seqs.split(",")], tmp, args.sim)
        if args.max_seq:
            max_seq(args.max_seq_models.split(","), tmp)


if __name__ == "__main__":
    main()
