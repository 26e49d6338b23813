"""A 16,384-token microbatch trained on the host, its memory measured.

A small Llama-shaped model (rp.shapes --custom: one decoder layer, width
32, vocabulary 256) at 16,384 tokens per sequence, compiled with the fused
loss (--fuse-loss: --fuse-loss=auto keeps these 16 MiB of logits unfused,
whose plan's arenas exceed its planned peak by about 13 MiB, 1.26x, which
rp-run refuses; docs/graph-ir.md, "Fused only where it pays") for 1 device and for 2 (a forward stage, the tail and a
backward stage), runs one sync step each with rp-run. For each run this
prints the arenas rp-run allocates per pass, the compiler's planned peak,
their ratio, and the process's peak resident memory next to what the plan
accounts for (the arenas of both passes in flight on every device, plus the
plan's host buffers), and fails when the arenas exceed the planned peak or
the process holds far more than the plan accounts for.

Usage: long_sequence.py RP_COMPILE RP_RUN WORK_DIR
"""

import json
import re
import resource
import subprocess
import sys
import time

SEQ = 16384
MODEL = ("layers=1,hidden=32,heads=1,kv_heads=1,head_dim=16,ffn=64,"
         "vocab=256,tied=0,qk_norm=0")
DTYPE_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "u8": 1,
               "i8": 1, "bool": 1}
# The process beyond its buffers: code, BLAS, thread stacks, the allocator.
OVERHEAD_BYTES = 96 << 20


def host_bytes(plan_json):
    """Bytes of the plan's host buffers (weights, global batch, staging)."""
    total = 0
    for b in plan_json["buffers"]:
        if b.get("device", -1) >= 0:
            continue
        n = 1
        for d in b.get("shape", []):
            n *= d
        total += n * DTYPE_BYTES.get(b["dtype"], 4)
    return total


def run(rp_compile, rp_run, work, name, flags):
    plan = f"{work}/{name}.rpplan"
    subprocess.run([rp_compile, f"{work}/long.mlir", "-o", plan] + flags,
                   check=True, stderr=subprocess.DEVNULL)
    described = json.loads(subprocess.run(
        [rp_run, plan, "--describe=json"], check=True,
        stdout=subprocess.PIPE).stdout)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.monotonic()
    done = subprocess.run([rp_run, plan, "--steps", "1", "--sync",
                           "--threads", "2"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
    seconds = time.monotonic() - start
    if done.returncode != 0:
        sys.exit(f"{name}: rp-run failed:\n{done.stderr}")
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    if rss <= before * 1024:
        rss = None  # an earlier child peaked higher: not this run's peak
    arenas = [float(k) * 1024 for k in re.search(
        r"device buffers per device: ([\d. ]+) KiB", done.stderr)
        .group(1).split()]
    ratio = float(re.search(r"arenas at most ([\d.]+)x it",
                            done.stderr).group(1))
    planned = described["planned_peak_bytes"]
    loss = re.search(r"^step 0 loss (\S+)$", done.stdout, re.M).group(1)
    # Both passes in flight on every device, each on its own arenas
    # (renamed devices: every arena as large as the largest).
    devices = described["devices"]
    accounted = 2 * devices * max(arenas) + host_bytes(described)
    print(f"{name}: {devices} device(s), {SEQ} tokens per microbatch, "
          f"loss {loss}, {seconds:.1f} s")
    print(f"{name}: arenas {' '.join(f'{a / 2**20:.2f}' for a in arenas)} "
          f"MiB, planned peak "
          f"{' '.join(f'{p / 2**20:.2f}' for p in planned)} MiB, "
          f"ratio {ratio:.3f}")
    if rss is not None:
        print(f"{name}: peak RSS {rss / 2**20:.1f} MiB, the plan accounts "
              f"for {accounted / 2**20:.1f} MiB")
    print(f"{name}: arenas within the planned peak: "
          f"{'yes' if ratio <= 1.0 else 'NO'}")
    if rss is not None and rss > accounted + OVERHEAD_BYTES:
        print(f"{name}: RSS over the plan's buffers by more than the "
              f"process's overhead")
    return ratio


def main(rp_compile, rp_run, work):
    subprocess.run([sys.executable, "-m", "rp.shapes", "--custom", MODEL,
                    "--batch", "1", "--seq", str(SEQ), "--dtype", "f32",
                    "-o", f"{work}/long.mlir"], check=True)
    run(rp_compile, rp_run, work, "one", ["--devices", "1", "--fuse-loss"])
    run(rp_compile, rp_run, work, "two",
        ["--fuse-loss", "--devices", "2", "--microbatches", "1", "--stages",
         "fwd:2;bwd:1,2"])


if __name__ == "__main__":
    main(*sys.argv[1:])
