"""Compares two checkpoints' f32 tensors (weights.safetensors or
optimizer.safetensors) in DESIGN.md's measure: per tensor
||a - b||_2 / ||b||_2 <= TOL. Also compares two stdouts' "step K loss V"
lines, relative |a - b| / |b| <= TOL.

Usage: compare_weights.py A.safetensors B.safetensors A.out B.out TOL
Prints the worst tensor and loss error; exits 1 on a mismatch.
"""

import re
import sys

import numpy as np
from rp import safetensors as rp_safetensors


def losses(path):
    return {int(k): float(v) for k, v in
            re.findall(r"^step (\d+) loss (\S+)$", open(path).read(), re.M)}


def main(a_path, b_path, a_out, b_out, tol):
    tol = float(tol)
    a, b = rp_safetensors.read(a_path), rp_safetensors.read(b_path)
    bad = []
    if sorted(a) != sorted(b):
        bad.append(f"tensors differ: {sorted(set(a) ^ set(b))}")
    worst = (0.0, "")
    for name in sorted(set(a) & set(b)):
        x, y = a[name].astype(np.float64), b[name].astype(np.float64)
        err = np.linalg.norm(x - y) / max(np.linalg.norm(y), 1e-30)
        worst = max(worst, (err, name))
        if err > tol:
            bad.append(f"{name}: {err:.3e}")
    la, lb = losses(a_out), losses(b_out)
    if sorted(la) != sorted(lb) or not la:
        bad.append(f"steps differ: {sorted(la)} vs {sorted(lb)}")
    loss_err = max((abs(la[k] - lb[k]) / abs(lb[k]) for k in la if k in lb),
                   default=0.0)
    if loss_err > tol:
        bad.append(f"loss error {loss_err:.3e}")
    print(f"worst tensor {worst[1]} {worst[0]:.3e}, worst loss {loss_err:.3e}")
    for line in bad:
        print(line)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main(*sys.argv[1:])
