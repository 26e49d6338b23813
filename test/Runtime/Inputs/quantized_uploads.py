"""The sim's weight uploads of a quantized base are the blobs' bytes.

Usage: quantized_uploads.py RP_COMPILE RP_RUN GRAPH.mlir OUTDIR PROFILE

For 1 and 2 devices, compiles GRAPH as a LoRA plan with a bf16 base and
with --quantize-base nf4 and int8, the stages fixed so that the plans upload
the same weights, and runs each on `rp-run --backend sim`. It prints, for
FileCheck, whether:
 - the sim's weight_upload_bytes is rp-compile's "weight uploads" figure
   and the plan's own weight_h2d copies summed (what the sim timed is what
   the plan lists and the compiler counted);
 - each quantized weight is uploaded as its blob, the size written here
   from the format (contract/include/rp/contract/Quantize.h, QLoRA's NF4:
   codes, 8-bit absmax per 64, f32 absmax per 256 of those, an f32
   offset), of the element count its bf16 plan uploads;
 - the bf16 plan's sim bytes less the quantized plan's are exactly the
   quantized uploads' 2 n - blob(n): no weight is priced at bf16's bytes;
 - the bytes per quantized value (nf4 about 0.52, int8 about 1.06) and
   the nf4 plan's weight uploads at most 0.3 of the bf16 plan's;
 - --accumulate 2 uploads twice a pass's bytes per step;
 - on PROFILE (a host model: shared uplinks, host DRAM), the compiler's
   predicted timeline of each quantized plan (its jobs' end) and the sim's
   jobs_ms agree within 1 %, as sim_crosscheck.py holds unquantized plans.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

compile_tool, run_tool, graph, out, profile = sys.argv[1:6]
out = Path(out)
STAGES = "fwd:2,3;bwd:1,1,2,2"


def align4(a):
    return (a + 3) & ~3


def blob_bytes(kind, n):
    blocks = -(-n // 64)
    if kind == "int8":
        return align4(n) + 4 * blocks
    codes = align4(-(-n // 2))
    absmax2 = align4(codes + blocks)
    return absmax2 + 4 * -(-blocks // 256) + 4


def run(*args):
    done = subprocess.run([str(a) for a in args], capture_output=True,
                          text=True)
    if done.returncode != 0:
        sys.exit(f"{args[0]} failed ({done.returncode}): {done.stderr}")
    return done


def plan_figures(kind, devices):
    plan = out / f"{kind}-{devices}.rpplan"
    summary = run(compile_tool, graph, "-o", plan, "--devices", devices,
                  "--microbatches", 4, "--lora-rank", 4, "--quantize-base",
                  kind, "--stages", STAGES).stderr
    mib = re.search(r"weight uploads ([0-9.]+) MiB per step", summary).group(1)
    desc = json.loads(run(run_tool, plan, "--describe=json").stdout)

    def sim(*flags):
        text = run(run_tool, plan, "--backend", "sim", *flags).stdout
        return {k: float(v) for k, v in (l.split() for l in text.splitlines())}

    return {"mib": mib, "desc": desc, "sim": sim(),
            "sim2": sim("--accumulate", 2)}


def uploads(desc):
    """(source buffer, bytes) of every weight_h2d copy of a pass."""
    return [(c["src"], c["bytes"]) for j in desc["jobs"]
            if j["queue"] == "weight_h2d" for c in j.get("copies", [])]


def elements(shape):
    n = 1
    for d in shape:
        n *= d
    return n


for devices in (1, 2):
    figures = {k: plan_figures(k, devices) for k in ("none", "nf4", "int8")}
    bf16 = figures["none"]
    # The element count of each base weight, from the bf16 plan.
    numel = {b["weight"]["param"]: elements(b["shape"])
             for b in bf16["desc"]["buffers"] if b.get("weight")}
    for kind, f in figures.items():
        sim_bytes = int(f["sim"]["weight_upload_bytes"])
        listed = sum(b for _, b in uploads(f["desc"]))
        print(f"{devices} device(s), {kind}: sim = compile's figure "
              f"{f'{sim_bytes / 2**20:.3f}' == f['mib']}, = the plan's copies "
              f"{sim_bytes == listed}, accumulate 2 twice "
              f"{int(f['sim2']['weight_upload_bytes']) == 2 * sim_bytes}")
        if kind == "none":
            continue
        buffers = f["desc"]["buffers"]
        quantized = [(buffers[s]["weight"]["param"], b)
                     for s, b in uploads(f["desc"])
                     if buffers[s]["dtype"] == "u8"]
        blobs_right = all(b == blob_bytes(kind, numel[p]) for p, b in quantized)
        saved = sum(2 * numel[p] - b for p, b in quantized)
        bf16_bytes = int(bf16["sim"]["weight_upload_bytes"])
        per_value = sum(b for _, b in quantized) / sum(numel[p] for p, _ in
                                                        quantized)
        lo, hi = (0.5, 0.53) if kind == "nf4" else (1.0, 1.07)
        print(f"{devices} device(s), {kind}: {len(quantized) > 0 and blobs_right}"
              f" blobs; bf16 - {kind} = the blobs' saving "
              f"{bf16_bytes - sim_bytes == saved}; bytes a value in "
              f"[{lo}, {hi}] {lo <= per_value <= hi}")
        print(f"{devices} device(s), {kind}: {sim_bytes} of {bf16_bytes} "
              f"bytes, {per_value:.4f} a quantized value", file=sys.stderr)
    for kind in ("nf4", "int8"):
        plan = out / f"{kind}-{devices}-host.rpplan"
        run(compile_tool, graph, "-o", plan, "--devices", devices,
            "--microbatches", 4, "--lora-rank", 4, "--quantize-base", kind,
            "--stages", STAGES, "--hw", profile)
        jobs = json.loads(run(run_tool, plan, "--describe=json").stdout)["jobs"]
        end = max(j.get("predicted_start_ms", 0) + j.get("predicted_ms", 0)
                  for j in jobs)
        sim = float(dict(l.split() for l in run(
            run_tool, plan, "--backend", "sim").stdout.splitlines())["jobs_ms"])
        print(f"{devices} device(s), {kind} on the host model: predicted and "
              f"sim within 1 % {abs(sim - end) <= 0.01 * end}")
        print(f"{devices} device(s), {kind}: predicted {end:.4f} ms, sim "
              f"{sim:.4f} ms", file=sys.stderr)
    print(f"{devices} device(s): nf4 / bf16 <= 0.3 "
          f"{figures['nf4']['sim']['weight_upload_bytes'] <= 0.3 * bf16['sim']['weight_upload_bytes']}")
