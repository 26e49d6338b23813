"""LoRA adapters against PyTorch on the Llama of make_models.py.

Usage: lora_vs_torch.py RP_COMPILE RP_RUN MODELS_DIR WORK_DIR

Compiles llama_op17.onnx with --lora-rank 4 --lora-alpha 8 --lora-targets
'q_proj|v_proj', sets nonzero values in both adapter matrices with
--init-weights, and checks (1) that only adapters get gradients and (2) that
each adapter gradient equals PyTorch's for the same adapters written here
(y = x W^T + alpha/r * (x A^T) B^T), within 1e-4 (DESIGN.md's measure).
The set-up is lora_common.py's. Exits 1 on a mismatch.
"""

import os
import sys

import lora_common


def main(rp_compile, rp_run, models, work):
    os.makedirs(work, exist_ok=True)
    _, adapters = lora_common.reference(models)
    _, init, got = lora_common.compile_and_run(rp_compile, rp_run, models,
                                               work, adapters, "lora")
    failed = sorted(set(got) - set(init))
    for name in failed:
        print(f"MISMATCH: non-adapter {name} has a gradient")
    worst, missing = lora_common.worst_gradient(got, adapters)
    for name in missing:
        print(f"MISMATCH: no gradient for {name}")
    ok = not failed and not missing and worst <= 1e-4
    print(f"{'ok' if ok else 'MISMATCH'}: {len(got)} gradients, all adapters; "
          f"worst {worst:.2e} against PyTorch (tolerance 1e-4)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
