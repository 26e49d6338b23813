"""Checks rp's step-0 loss and gradients against PyTorch's.

Usage: compare_grads.py MODELS_DIR NAME RP_GRADS.safetensors RP_STDOUT TOL

MODELS_DIR/NAME.grads.npz and NAME.loss.npy hold PyTorch's gradients and
loss (test/Import/ONNX/make_models.py). Every parameter gradient must be
within TOL in DESIGN.md's measure, per tensor ||a - b||_2 / ||ref||_2, and
the loss rp printed ("step 0 loss V") within TOL relative. Prints the worst
tensor; exits 1 on any mismatch or missing gradient.
"""

import re
import sys

import numpy as np
from rp import safetensors as rp_safetensors


def main(models, name, rp_path, stdout_path, tol):
    tol = float(tol)
    ref = dict(np.load(f"{models}/{name}.grads.npz"))
    ref_loss = float(np.load(f"{models}/{name}.loss.npy"))
    rp = rp_safetensors.read(rp_path)
    rp_loss = float(re.search(r"step 0 loss (\S+)",
                              open(stdout_path).read()).group(1))
    bad = []
    worst = (0.0, "")
    for pname, g in ref.items():
        if pname not in rp:
            bad.append(f"no gradient for {pname}")
            continue
        err = np.linalg.norm(rp[pname].astype(np.float64) - g) / max(
            np.linalg.norm(g), 1e-30)
        worst = max(worst, (err, pname))
        if err > tol:
            bad.append(f"{pname}: {err:.3e}")
    loss_err = abs(rp_loss - ref_loss) / abs(ref_loss)
    if loss_err > tol:
        bad.append(f"loss rp {rp_loss} torch {ref_loss}")
    for b in bad:
        print("MISMATCH:", b)
    print(f"{'ok' if not bad else 'FAILED'}: {len(ref)} gradients, worst "
          f"{worst[0]:.3e} ({worst[1]}), loss {rp_loss:.6f} vs torch "
          f"{ref_loss:.6f} (tolerance {tol:.0e})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:6]))
