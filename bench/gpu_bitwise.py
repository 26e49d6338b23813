"""G plan devices bitwise equal to one on a GPU (DESIGN.md's contract;
issue 31): the bf16 Qwen3 plans bench/gpu_train.py prepares for 1, 2 and 4
devices (5 microbatches, the tail as two jobs), each trained on the cuda
backend with every plan device on GPU 0 (RP_CUDA_GPUS=0,0,0,0), twice; the
printed losses must be the same bits across device counts and runs.

    python3 bench/gpu_bitwise.py build-gpu-plans [--steps 3] [--bin DIR]

Exit 0 when every loss matches, 1 otherwise (or without a GPU).
"""

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_train import BITWISE, ROOT, rp_run  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("data", type=Path)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--bin", type=Path, default=ROOT / "build-gpu" / "bin")
    args = p.parse_args(argv)
    env = dict(os.environ, RP_CUDA_GPUS="0,0,0,0")
    reference, ok = None, True
    for model, name, _, devices, tag in BITWISE:
        plan = args.data / f"{model}-{name}" / "m.rpplan"
        for attempt in (1, 2):
            got, err = rp_run(args.bin, plan, "cuda", args.steps, args.data,
                              env, tag)
            if err:
                print(f"gpu_bitwise: {name} run {attempt} failed:\n{err}",
                      file=sys.stderr)
                return 1
            losses = got["losses"]
            same = reference is None or losses == reference
            print(f"{name} run {attempt}: {losses} "
                  f"{'same bits' if same else 'DIFFERENT from 1 device'}")
            reference = reference or losses
            ok = ok and same
    print("gpu_bitwise: " + ("ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
