"""Checks rp-compile --report-max-seq with rp's own stages at each length.

Usage: max_seq_own_check.py RP-COMPILE OUTDIR

Builds a small Llama-like graph (6 layers) at sequence 2000 and asks
rp-compile (2 devices, 3 microbatches, a 64 MiB budget, no --stages) for
the largest sequence that fits. The report partitions each length as
rp-partition does, so the graph rebuilt at that length must compile by
itself (rp's partitioner picks stages that fit, the same ones the report
prints) and one token more must be refused: the answer is the longest
sequence rp-compile compiles.
"""
import re
import subprocess
import sys

rp_compile, out = sys.argv[1], sys.argv[2]
shape = ("layers=6,hidden=96,heads=4,kv_heads=2,head_dim=24,ffn=160,"
         "vocab=101,tied=0,qk_norm=1")
flags = ["--devices", "2", "--microbatches", "3", "--hw", "rtx4090",
         "--budget-gib", "0.0625"]


def graph(seq):
    path = "%s/own%d.mlir" % (out, seq)
    subprocess.run([sys.executable, "-m", "rp.shapes", "--custom", shape,
                    "--seq", str(seq), "--dtype", "f32", "-o", path],
                   check=True)
    return path


def compile_at(seq, *extra):
    return subprocess.run([rp_compile, graph(seq), "-o",
                           "%s/own.rpplan" % out, *flags, *extra],
                          capture_output=True, text=True)


r = compile_at(2000, "--report-max-seq")
remark = re.search(r"remark: (.*)", r.stderr).group(1)
print(remark)
seq = int(re.search(r"fits is (\d+) tokens", remark).group(1))
reported = re.search(r"partitioner cuts (\S+) there", remark).group(1)
at = compile_at(seq)
stages = re.search(r"in stages (\S+) \(", at.stderr)
print("at the reported sequence: %s, stages %s" % (
    "fits" if at.returncode == 0 else "DOES NOT FIT",
    "as reported" if stages and stages.group(1) == reported else
    "DIFFERENT: %s" % (stages.group(1) if stages else at.stderr)))
# At the answer the leanest partition peaks within 0.1 % of the budget:
# the partitioner takes the memory objective's stages without timing the
# step-time search's candidates (partitionAtMemoryLimit).
limit = re.search(r"(\d+) answered by the memory objective at the memory "
                  r"limit", at.stderr)
print("at the reported sequence the partitioner: %s" % (
    "at the memory limit, %s candidates timed" % re.search(
        r"search timed (\d+) candidates", at.stderr).group(1)
    if limit else "searched"))
over = compile_at(seq + 1)
print("one token more: %s" % ("COMPILES" if over.returncode == 0 else
                              "refused"))
print("\n".join(l for l in over.stderr.splitlines()
                if "error:" in l or "note: to fit" in l))
