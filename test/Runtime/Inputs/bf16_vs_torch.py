"""bf16 training gradients of rp against PyTorch's bf16 on the GPT of
make_models.py.

Usage: bf16_vs_torch.py RP_COMPILE RP_RUN MODELS_DIR WORK_DIR

rp: rp-compile --dtype bf16 (storage and compute bf16, f32 accumulation in
the kernels, f32 master weights). PyTorch: the same model cast to bfloat16
on the CPU. Both are compared with the float32 gradients, and with each
other. Stated tolerance, per tensor ||a - b|| / ||ref||: rp's bf16 gradients
are within 5e-2 of f32 (bf16 keeps 8 significant bits; PyTorch's own bf16
lands within about the same of f32), and the step-0 losses of rp and
PyTorch bf16 agree within 1e-2. Exits 1 when a check fails.
"""

import os
import re
import subprocess
import sys

import numpy as np
from rp import safetensors as rp_safetensors
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../Import/ONNX"))
import make_models  # noqa: E402

GRAD_TOL, LOSS_TOL = 5e-2, 1e-2


def torch_grads(dtype, tokens, labels):
    GPT = make_models.define_models(torch)[0]
    torch.manual_seed(0)
    model = make_models.make_distinct(torch, GPT(), seed=100).eval().to(dtype)
    logits = model(tokens)
    loss = torch.nn.functional.cross_entropy(
        logits.float().reshape(-1, 64), labels.reshape(-1), ignore_index=-100)
    loss.backward()
    return loss.item(), {n: p.grad.float().numpy()
                         for n, p in model.named_parameters()}


def main(rp_compile, rp_run, models, work):
    os.makedirs(work, exist_ok=True)
    tokens = torch.tensor(np.load(f"{models}/gpt_op17.input.npy"))
    labels = torch.tensor(np.load(f"{models}/gpt_op17.labels.npy"))
    f32_loss, f32 = torch_grads(torch.float32, tokens, labels)
    bf_loss, bf = torch_grads(torch.bfloat16, tokens, labels)
    plan = f"{work}/gpt.bf16.rpplan"
    subprocess.run([rp_compile, f"{models}/gpt_op17.onnx", "-o", plan,
                    "--dtype", "bf16"], check=True, capture_output=True)
    out = subprocess.run([rp_run, plan, "--input",
                          f"tokens={models}/gpt_op17.input.npy", "--labels",
                          f"{models}/gpt_op17.labels.npy", "--dump-grads",
                          f"{work}/g.safetensors"], check=True,
                         capture_output=True, text=True).stdout
    rp_loss = float(re.search(r"step 0 loss (\S+)", out).group(1))
    rp = rp_safetensors.read(f"{work}/g.safetensors")

    def worst(a, ref):
        return max(np.linalg.norm(a[n] - ref[n]) / np.linalg.norm(ref[n])
                   for n in ref)

    rp_vs_f32 = worst(rp, f32)
    torch_vs_f32 = worst(bf, f32)
    rp_vs_torch = worst(rp, bf)
    loss_err = abs(rp_loss - bf_loss) / abs(bf_loss)
    ok = (rp_vs_f32 <= GRAD_TOL and rp_vs_torch <= GRAD_TOL and
          loss_err <= LOSS_TOL)
    print(f"{'ok' if ok else 'MISMATCH'}: bf16 gradients: rp vs f32 "
          f"{rp_vs_f32:.2e}, torch bf16 vs f32 {torch_vs_f32:.2e}, rp vs "
          f"torch bf16 {rp_vs_torch:.2e}; losses rp {rp_loss:.5f}, torch bf16 "
          f"{bf_loss:.5f}, f32 {f32_loss:.5f} (tolerances {GRAD_TOL:g}, "
          f"{LOSS_TOL:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
