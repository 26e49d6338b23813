"""The compiler's predicted step and the sim's agree on a one-microbatch
plan (one sequence per step), and the sim's does not depend on how many
steps it lays out.

With one microbatch a pass's stage jobs are a chain as long as G devices'
share of a step, and in async mode step k waits for step k-2's update, so
the steps pair up: a short period and a long one. A steady step read over
one step (not two) was the short one or the long one by the parity of the
step count: the compiler (7 steps) predicted the short, the sim with
--steps 8 the long (Qwen3-1.7B at 32k on 8 x rtx4090: 23,386 against
4,043 tokens/s, the true mean 7,000).

    one_microbatch.py RP_COMPILE RP_RUN MODEL PROFILE TMPDIR TOLERANCE
"""

import re
import subprocess
import sys
from pathlib import Path


def run(args):
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"failed ({r.returncode}): {' '.join(args)}\n{r.stderr}")
    return r


def main():
    rp_compile, rp_run, model, profile, tmp, tolerance = sys.argv[1:]
    tolerance = float(tolerance)
    for g in (2, 4):
        plan = str(Path(tmp) / f"g{g}.rpplan")
        err = run([rp_compile, model, "-o", plan, "--devices", str(g),
                   "--microbatches", "1", "--hw", profile]).stderr
        predicted = float(re.search(r"predicted step ([\d.]+) ms", err)[1])
        steps = {}
        for n in (7, 8, 9):
            out = run([rp_run, plan, "--backend", "sim", "--steps",
                       str(n)]).stdout
            steps[n] = float(dict(l.split() for l in out.splitlines())
                             ["step_ms"])
        spread = (max(steps.values()) - min(steps.values())) / \
            min(steps.values())
        off = max(abs(s / predicted - 1) for s in steps.values())
        print(f"G={g}: compiler {predicted:.4f} ms, sim "
              + ", ".join(f"{s:.4f}" for s in steps.values())
              + f" ms at 7, 8, 9 steps; same at any step count: "
              f"{spread <= 1e-9}; within {100 * tolerance:.0f}%: "
              f"{off <= tolerance} ({100 * off:.2f}%)")


if __name__ == "__main__":
    main()
