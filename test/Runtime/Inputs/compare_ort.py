"""Checks rp's forward output against onnxruntime's on the same input.

Usage: compare_ort.py MODEL.onnx INPUT_NAME INPUT.npy RP_OUTPUT.npy TOLERANCE

Runs the model's first output through onnxruntime (CPU) and compares it to
rp's dump with DESIGN.md's measure: max|a - b| / max|ref| <= TOLERANCE.
Prints the measure; exits 1 when it is above the tolerance or the shapes
differ.
"""

import sys

import numpy as np
import onnxruntime as ort


def main(model, name, input_path, rp_path, tolerance):
    feed = {name: np.load(input_path)}
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    ref = session.run(None, feed)[0].astype(np.float64)
    got = np.load(rp_path).astype(np.float64)
    if got.shape != ref.shape:
        print(f"shape mismatch: rp {got.shape}, onnxruntime {ref.shape}")
        return 1
    err = np.max(np.abs(got - ref)) / max(np.max(np.abs(ref)), 1e-30)
    ok = err <= float(tolerance)
    print(f"{'ok' if ok else 'MISMATCH'}: max|rp - ort| / max|ort| = "
          f"{err:.3e} (tolerance {float(tolerance):.0e})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:6]))
