"""LoRA adapters against PyTorch on the Llama of make_models.py.

Usage: lora_vs_torch.py RP_COMPILE RP_RUN MODELS_DIR WORK_DIR

Compiles llama_op17.onnx with --lora-rank 4 --lora-alpha 8 --lora-targets
'q_proj|v_proj', sets nonzero values in both adapter matrices with
--init-weights, and checks (1) that only adapters get gradients and (2) that
each adapter gradient equals PyTorch's for the same adapters written here
(y = x W^T + alpha/r * (x A^T) B^T), within 1e-4 (DESIGN.md's measure).
Exits 1 on a mismatch.
"""

import os
import subprocess
import sys

import numpy as np
from rp import safetensors as rp_safetensors
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../Import/ONNX"))
import make_models  # noqa: E402

RANK, ALPHA = 4, 8.0


def main(rp_compile, rp_run, models, work):
    os.makedirs(work, exist_ok=True)
    Llama = make_models.define_models(torch)[1]
    torch.manual_seed(0)
    model = make_models.make_distinct(torch, Llama(), seed=101).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    g = torch.Generator().manual_seed(7)
    adapters = {}
    for name, module in model.named_modules():
        if not name.endswith(("q_proj", "v_proj")):
            continue
        out_f, in_f = module.weight.shape
        a = (0.1 * torch.randn(RANK, in_f, generator=g)).requires_grad_()
        b = (0.1 * torch.randn(out_f, RANK, generator=g)).requires_grad_()
        adapters[name + ".weight"] = (a, b)

        def forward(x, m=module, a=a, b=b):
            return x @ m.weight.t() + (ALPHA / RANK) * ((x @ a.t()) @ b.t())
        module.forward = forward

    tokens = torch.tensor(np.load(f"{models}/llama_op17.input.npy"))
    labels = torch.tensor(np.load(f"{models}/llama_op17.labels.npy"))
    logits = model(tokens)
    loss = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
        ignore_index=-100)
    loss.backward()

    init = {}
    for w, (a, b) in adapters.items():
        init[w + ".lora_A"] = a.detach().numpy()
        init[w + ".lora_B"] = b.detach().numpy()
    rp_safetensors.write(f"{work}/init.safetensors", init)
    plan = f"{work}/lora.rpplan"
    subprocess.run([rp_compile, f"{models}/llama_op17.onnx", "-o", plan,
                    "--lora-rank", str(RANK), "--lora-alpha", str(ALPHA),
                    "--lora-targets", "q_proj|v_proj"], check=True,
                   capture_output=True)
    subprocess.run([rp_run, plan, "--input",
                    f"tokens={models}/llama_op17.input.npy", "--labels",
                    f"{models}/llama_op17.labels.npy", "--init-weights",
                    f"{work}/init.safetensors", "--dump-grads",
                    f"{work}/grads.safetensors"], check=True,
                   capture_output=True)
    got = rp_safetensors.read(f"{work}/grads.safetensors")
    failed = sorted(set(got) - set(init))
    for name in failed:
        print(f"MISMATCH: non-adapter {name} has a gradient")
    worst = 0.0
    for w, (a, b) in adapters.items():
        for suffix, t in ((".lora_A", a), (".lora_B", b)):
            ref = t.grad.numpy()
            if w + suffix not in got:
                print(f"MISMATCH: no gradient for {w + suffix}")
                failed.append(w)
                continue
            err = np.linalg.norm(got[w + suffix] - ref) / np.linalg.norm(ref)
            worst = max(worst, err)
    ok = not failed and worst <= 1e-4
    print(f"{'ok' if ok else 'MISMATCH'}: {len(got)} gradients, all adapters; "
          f"worst {worst:.2e} against PyTorch (tolerance 1e-4)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
