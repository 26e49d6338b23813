"""rp's CPU AdamW against torch.optim.AdamW(foreach=True): same parameters,
same gradients, same thread count.

Usage: .venv/bin/python bench/adamw_vs_torch.py [--sizes 6000000,6000000,6000000,6000000]
       [--steps 10] [--threads 1,N] [--seed 0]

Generates the weights and three gradient sets with numpy (raw float32 files
that rp-bench-optimizer reads; torch gets the same arrays), runs --steps
AdamW steps on each side (step k uses gradient set k mod 3; lr 1e-3, betas
0.9/0.999, eps 1e-8, weight decay 1e-2: torch's defaults), and prints for
every thread count T (torch.set_num_threads(T), rp --threads T):
  * agreement of the final weights and moments: max |rp - torch| and how
    many elements differ in their bits at all (rp follows torch's CPU
    kernels operation for operation, so this is expected to be 0);
  * the best step time of each, the ratio rp / torch, and the effective
    bandwidth of each (AdamW moves 28 bytes per parameter: reads w, g, m, v
    and writes w, m, v) against this machine's copy bandwidth, measured here
    as a numpy copy of a 512 MiB array (bytes read + written / time; numpy
    copies on one thread).

rp-bench-optimizer is looked up in $RP_BIN (default build/bin).
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BYTES_PER_PARAM = 28
LR, BETA1, BETA2, EPS, WD = 1e-3, 0.9, 0.999, 1e-8, 1e-2
NUM_GRAD_SETS = 3


def copy_bandwidth(nbytes=512 << 20, repeats=5):
    src = np.ones(nbytes // 4, np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # fault the pages in
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
    return 2 * src.nbytes / best / 1e9


def make_data(sizes, seed):
    rng = np.random.default_rng(seed)
    total = sum(sizes)
    w = rng.standard_normal(total, dtype=np.float32)
    grads = []
    for _ in range(NUM_GRAD_SETS):
        g = rng.standard_normal(total, dtype=np.float32)
        # Magnitudes over four decades, as real gradients have.
        g *= np.float32(10.0) ** rng.uniform(-5, -1, total).astype(np.float32)
        grads.append(g)
    return w, grads


def run_rp(driver, tmp, sizes, steps, threads):
    cmd = [str(driver), "--sizes", ",".join(map(str, sizes)),
           "--weights", str(tmp / "w.f32")]
    for k in range(NUM_GRAD_SETS):
        cmd += ["--grads", str(tmp / f"g{k}.f32")]
    cmd += ["--steps", str(steps), "--threads", str(threads),
            "--lr", repr(LR), "--beta1", repr(BETA1), "--beta2", repr(BETA2),
            "--eps", repr(EPS), "--weight-decay", repr(WD),
            "--out-weights", str(tmp / "rp_w.f32"), "--out-m", str(tmp / "rp_m.f32"),
            "--out-v", str(tmp / "rp_v.f32")]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    best_ms = float(re.search(r"^best_step_ms (\S+)", out, re.M).group(1))
    result = [np.fromfile(tmp / f"rp_{x}.f32", dtype=np.float32) for x in "wmv"]
    return best_ms, result


def run_torch(w, grads, sizes, steps, threads):
    import torch
    torch.set_num_threads(threads)
    offsets = np.cumsum([0] + list(sizes))
    params = [torch.from_numpy(w[a:b].copy()).requires_grad_()
              for a, b in zip(offsets[:-1], offsets[1:])]
    opt = torch.optim.AdamW(params, lr=LR, betas=(BETA1, BETA2), eps=EPS,
                            weight_decay=WD, foreach=True)
    grad_views = [[torch.from_numpy(g[a:b]) for a, b in zip(offsets[:-1], offsets[1:])]
                  for g in grads]
    best = float("inf")
    for k in range(steps):
        for p, g in zip(params, grad_views[k % NUM_GRAD_SETS]):
            p.grad = g
        t0 = time.perf_counter()
        opt.step()
        best = min(best, time.perf_counter() - t0)
    with torch.no_grad():
        result = [np.concatenate([p.detach().numpy() for p in params]),
                  np.concatenate([opt.state[p]["exp_avg"].numpy() for p in params]),
                  np.concatenate([opt.state[p]["exp_avg_sq"].numpy() for p in params])]
    return best * 1e3, result


def compare(name, a, b):
    diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
    differ = int(np.count_nonzero(a.view(np.uint32) != b.view(np.uint32)))
    ulps = np.abs(a.view(np.int32).astype(np.int64) - b.view(np.int32).astype(np.int64))
    print(f"  {name}: max |rp - torch| {diff.max():.3g}, max ulps {int(ulps.max())}, "
          f"{differ} of {a.size} elements differ in bits")
    return differ


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default=",".join(["6000000"] * 4))
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", default=f"1,{os.cpu_count()}")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    thread_counts = sorted({int(t) for t in args.threads.split(",")})
    bin_dir = Path(os.environ.get("RP_BIN", ROOT / "build" / "bin"))
    driver = bin_dir / "rp-bench-optimizer"
    if not driver.exists():
        sys.exit(f"adamw_vs_torch: {driver} not found (build rp, or set RP_BIN)")

    import torch
    total = sum(sizes)
    print(f"AdamW, {len(sizes)} tensors, {total / 1e6:.1f}M parameters, {args.steps} steps "
          f"(best step timed); torch {torch.__version__} foreach=True")
    copy_gbs = copy_bandwidth()
    print(f"numpy copy bandwidth (read + write, 1 thread): {copy_gbs:.1f} GB/s")

    w, grads = make_data(sizes, args.seed)
    differing = 0
    with tempfile.TemporaryDirectory(prefix="rp-adamw-") as tmpdir:
        tmp = Path(tmpdir)
        w.tofile(tmp / "w.f32")
        for k, g in enumerate(grads):
            g.tofile(tmp / f"g{k}.f32")
        for threads in thread_counts:
            rp_ms, rp_out = run_rp(driver, tmp, sizes, args.steps, threads)
            torch_ms, torch_out = run_torch(w, grads, sizes, args.steps, threads)
            print(f"threads {threads}:")
            for name, a, b in zip(["weights", "exp_avg", "exp_avg_sq"], rp_out, torch_out):
                differing += compare(name, a, b)
            gbs = lambda ms: BYTES_PER_PARAM * total / (ms * 1e-3) / 1e9
            print(f"  rp    best step {rp_ms:8.2f} ms  {gbs(rp_ms):6.1f} GB/s "
                  f"({gbs(rp_ms) / copy_gbs:.2f} x copy)")
            print(f"  torch best step {torch_ms:8.2f} ms  {gbs(torch_ms):6.1f} GB/s "
                  f"({gbs(torch_ms) / copy_gbs:.2f} x copy)")
            print(f"  rp / torch time: {rp_ms / torch_ms:.3f}")
    print("bitwise equal to torch" if differing == 0
          else f"NOT bitwise equal to torch ({differing} elements differ)")


if __name__ == "__main__":
    main()
