"""What the LoRA checks against PyTorch share (lora_vs_torch.py,
lora_dropout_vs_torch.py): make_models.py's Llama with adapters on q_proj
and v_proj (rank 4, alpha 8, nonzero A and B from one seeded generator),
PyTorch's loss and adapter gradients on llama_op17's tokens, rp-compile and
rp-run on the same adapters, and the gradients compared.
"""

import os
import subprocess
import sys

import numpy as np
from rp import safetensors as rp_safetensors
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../Import/ONNX"))
import make_models  # noqa: E402

RANK, ALPHA, TARGETS = 4, 8.0, "q_proj|v_proj"


def reference(models, adapter_input=None):
    """PyTorch's loss and adapters {weight: (A, B)}, their gradients filled:
    y = x W^T + alpha/r * (x' A^T) B^T, x' = adapter_input(x, weight) when
    given (a dropout), else x."""
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
        weight = name + ".weight"
        adapters[weight] = (a, b)

        def forward(x, m=module, a=a, b=b, weight=weight):
            d = adapter_input(x, weight) if adapter_input else x
            return x @ m.weight.t() + (ALPHA / RANK) * ((d @ a.t()) @ b.t())
        module.forward = forward
    tokens = torch.tensor(np.load(f"{models}/llama_op17.input.npy"))
    labels = torch.tensor(np.load(f"{models}/llama_op17.labels.npy"))
    logits = model(tokens)
    loss = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
        ignore_index=-100)
    loss.backward()
    return float(loss), adapters


def compile_and_run(rp_compile, rp_run, models, work, adapters, name,
                    compile_args=(), run_args=()):
    """Writes `adapters` as rp's initial ones, compiles llama_op17 with the
    same LoRA and runs one step dumping the gradients: (rp-run's stdout,
    the adapters written, the gradients)."""
    init = {}
    for w, (a, b) in adapters.items():
        init[w + ".lora_A"] = a.detach().numpy()
        init[w + ".lora_B"] = b.detach().numpy()
    rp_safetensors.write(f"{work}/init.safetensors", init)
    plan = f"{work}/{name}.rpplan"
    subprocess.run([rp_compile, f"{models}/llama_op17.onnx", "-o", plan,
                    "--lora-rank", str(RANK), "--lora-alpha", str(ALPHA),
                    "--lora-targets", TARGETS, *compile_args], check=True,
                   capture_output=True)
    run = subprocess.run(
        [rp_run, plan, "--input", f"tokens={models}/llama_op17.input.npy",
         "--labels", f"{models}/llama_op17.labels.npy", "--init-weights",
         f"{work}/init.safetensors", *run_args, "--dump-grads",
         f"{work}/grads.safetensors"], check=True, capture_output=True,
        text=True)
    return run.stdout, init, rp_safetensors.read(f"{work}/grads.safetensors")


def worst_gradient(got, adapters):
    """The worst relative error of rp's adapter gradients against PyTorch's,
    and the adapter gradients rp did not dump (names with their suffix)."""
    worst, missing = 0.0, []
    for w, (a, b) in adapters.items():
        for suffix, t in ((".lora_A", a), (".lora_B", b)):
            if w + suffix not in got:
                missing.append(w + suffix)
                continue
            ref = t.grad.numpy()
            err = np.linalg.norm(got[w + suffix] - ref) / np.linalg.norm(ref)
            worst = max(worst, err)
    return worst, missing
