"""Checks rp-run --init-weights random's rule on a checkpoint's weights
(saved after a step at lr 0): norm scales ones, matrices and embeddings
normal(0, 0.02), every other parameter zeros. Names of the bundled GPT-2
export: ln_* / ln_f are its norms."""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "python"))
from rp import safetensors  # noqa: E402

weights = safetensors.read(sys.argv[1])
counts = {"normal": 0, "ones": 0, "zeros": 0}
for name, value in sorted(weights.items()):
    v = np.asarray(value, dtype=np.float64)
    if v.ndim >= 2:
        rule = "normal"
        # Five standard errors of the sample's mean and deviation.
        err = 5 * 0.02 / np.sqrt(v.size)
        ok = abs(v.std() - 0.02) < err and abs(v.mean()) < err
    elif ".ln" in "." + name and name.endswith("weight"):
        rule = "ones"
        ok = bool(np.all(v == 1))
    else:
        rule = "zeros"
        ok = bool(np.all(v == 0))
    if not ok:
        sys.exit(f"{name}: not {rule} (mean {v.mean()}, std {v.std()})")
    counts[rule] += 1
print("rule ok", " ".join(f"{k} {n}" for k, n in counts.items()))
