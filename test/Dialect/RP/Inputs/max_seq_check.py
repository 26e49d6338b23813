"""Checks rp-report-max-seq against graphs built at the sequence it reports.

Usage: max_seq_check.py RP-OPT OUTDIR [stage|layer]

Builds a small Llama-like graph at sequence 40, asks rp-report-max-seq for
the largest sequence that fits a 64 MiB device, then builds the graph again
at that sequence and at one more token, and plans their memory with the
same stages: the first must fit and the second must not. So the report's
retyping agrees with a graph that really has that sequence length. With
`layer`, the backward stages hold two layers each and recompute at layer
grain (one layer's intermediates at a time); with `stage` the same stages
recompute at stage grain, and the report adds what layer grain reaches;
with `auto` each trial chooses the grain per stage (rp-choose-recompute),
as the real plans then do.
With `moe`, the layers are mixture-of-experts layers (4 experts, top-2)
and the microbatch holds 2 sequences: the dispatched rows (tokens x top_k)
and the flattened tokens (2 x sequence) grow with the sequence too.
"""
import re
import subprocess
import sys

rp_opt, out = sys.argv[1], sys.argv[2]
grain = sys.argv[3] if len(sys.argv) > 3 else ""
shape = ("layers=3,hidden=96,heads=4,kv_heads=2,head_dim=24,ffn=160,"
         "vocab=101,tied=0,qk_norm=1")
batch = 1
if grain == "moe":
    shape += ",experts=4,top_k=2"
    batch = 2
stages = ("fwd:2,2;bwd:1,2,2" if grain in ("stage", "layer", "auto")
          else "fwd:2,2;bwd:1,1,1,1,1")
options = "devices=2 hw=rtx4090 microbatches=3 stages=" + stages
if grain in ("layer", "auto"):
    options += " recompute=" + grain


def graph(seq):
    path = "%s/g%s%d.mlir" % (out, grain, seq)
    subprocess.run([sys.executable, "-m", "rp.shapes", "--custom", shape,
                    "--seq", str(seq), "--batch", str(batch), "--dtype", "f32",
                    "-o", path], check=True)
    return path


def plan(seq):
    r = subprocess.run([rp_opt, graph(seq), "--rp-attach-loss",
                        "--rp-partition=" + options,
                        "--rp-choose-recompute=budget-gib=0.0625",
                        "--rp-lower-schedule",
                        "--rp-insert-transfers=weight-budget=0",
                        "--rp-plan-memory=budget-gib=0.0625", "-o", "/dev/null"],
                       capture_output=True, text=True)
    return r.returncode == 0, r.stderr


r = subprocess.run([rp_opt, graph(40), "--rp-attach-loss",
                    "--rp-partition=" + options,
                    "--rp-report-max-seq=budget-gib=0.0625", "-o", "/dev/null"],
                   capture_output=True, text=True, check=True)
print(r.stderr.strip().splitlines()[0])
seq = int(re.search(r"fits is (\d+) tokens", r.stderr).group(1))
fits, _ = plan(seq)
over, why = plan(seq + 1)
print("at the reported sequence: %s" % ("fits" if fits else "DOES NOT FIT"))
print("one token more: %s" % ("FITS" if over else "over budget"))
print(why.strip().splitlines()[0] if why else "")
