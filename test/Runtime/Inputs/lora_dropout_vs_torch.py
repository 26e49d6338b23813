"""LoRA dropout against PyTorch on the Llama of make_models.py.

Usage: lora_dropout_vs_torch.py RP_COMPILE RP_RUN MODELS_DIR WORK_DIR

Compiles llama_op17.onnx with --lora-rank 4 --lora-alpha 8 --lora-targets
'q_proj|v_proj' --lora-dropout 0.25, sets nonzero adapters with
--init-weights and runs one step with --seed 5. The PyTorch reference is
PEFT's LoRA forward, lora_B(lora_A(lora_dropout(x))) * alpha / r, with
lora_dropout replaced by rp's own mask: python/rp/_philox.py's Philox of
(seed 5, step 0, the weight's tensor_id, each element's global index).
Step 0's loss and every adapter gradient must agree within 1e-5; the same
reference without the mask must not (the dropout does something). The
set-up is lora_common.py's. Exits 1 on a mismatch.
"""

import os
import re
import sys

import numpy as np
from rp import _philox
import torch

import lora_common

P, SEED = 0.25, 5


def masked(x, weight):
    """rp's dropout of the adapter input of `weight` at step 0."""
    keep = _philox.dropout_mask(SEED, 0, _philox.tensor_id(weight),
                                tuple(x.shape), P)
    scale = float(_philox.dropout_scale(P))
    return x * torch.from_numpy(keep.astype(np.float32)) * scale


def main(rp_compile, rp_run, models, work):
    os.makedirs(work, exist_ok=True)
    loss, adapters = lora_common.reference(models, masked)
    plain, _ = lora_common.reference(models)
    stdout, init, got = lora_common.compile_and_run(
        rp_compile, rp_run, models, work, adapters, "dropout",
        compile_args=["--lora-dropout", str(P)],
        run_args=["--seed", str(SEED)])
    got_loss = float(re.search(r"step 0 loss (\S+)", stdout).group(1))
    worst, missing = lora_common.worst_gradient(got, adapters)
    failed = sorted(set(got) - set(init)) + missing
    loss_err = abs(got_loss - loss) / abs(loss)
    plain_err = abs(got_loss - plain) / abs(plain)
    ok = not failed and worst <= 1e-5 and loss_err <= 1e-5 and plain_err > 1e-4
    print(f"{'ok' if ok else 'MISMATCH'}: loss {got_loss:.6f} vs PyTorch's "
          f"{loss:.6f} with the mask (relative {loss_err:.1e}), "
          f"{plain:.6f} without (relative {plain_err:.1e}); {len(got)} "
          f"adapter gradients, worst {worst:.1e} (tolerance 1e-5)"
          + (f"; missing or extra {failed}" if failed else ""))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
