"""LoRA dropout against PyTorch on the Llama of make_models.py.

Usage: lora_dropout_vs_torch.py RP_COMPILE RP_RUN MODELS_DIR WORK_DIR

Compiles llama_op17.onnx with --lora-rank 4 --lora-alpha 8 --lora-targets
'q_proj|v_proj' --lora-dropout 0.25, sets nonzero adapters with
--init-weights and runs one step with --seed 5. The PyTorch reference is
PEFT's LoRA forward, lora_B(lora_A(lora_dropout(x))) * alpha / r, with
lora_dropout replaced by rp's own mask: python/rp/_philox.py's Philox of
(seed 5, step 0, the weight's tensor_id, each element's global index).
Step 0's loss and every adapter gradient must agree within 1e-5; the same
reference without the mask must not (the dropout does something).
Exits 1 on a mismatch.
"""

import os
import re
import subprocess
import sys

import numpy as np
from rp import _philox
from rp import safetensors as rp_safetensors
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../Import/ONNX"))
import make_models  # noqa: E402

RANK, ALPHA, P, SEED = 4, 8.0, 0.25, 5


def reference(models, masked):
    """PyTorch's loss and adapter gradients (the adapters' values)."""
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
        tensor = _philox.tensor_id(weight)

        def forward(x, m=module, a=a, b=b, tensor=tensor):
            d = x
            if masked:
                keep = _philox.dropout_mask(SEED, 0, tensor, tuple(x.shape), P)
                scale = float(_philox.dropout_scale(P))
                d = x * torch.from_numpy(keep.astype(np.float32)) * scale
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


def main(rp_compile, rp_run, models, work):
    os.makedirs(work, exist_ok=True)
    loss, adapters = reference(models, masked=True)
    plain, _ = reference(models, masked=False)
    init = {}
    for w, (a, b) in adapters.items():
        init[w + ".lora_A"] = a.detach().numpy()
        init[w + ".lora_B"] = b.detach().numpy()
    rp_safetensors.write(f"{work}/init.safetensors", init)
    plan = f"{work}/dropout.rpplan"
    subprocess.run([rp_compile, f"{models}/llama_op17.onnx", "-o", plan,
                    "--lora-rank", str(RANK), "--lora-alpha", str(ALPHA),
                    "--lora-targets", "q_proj|v_proj", "--lora-dropout",
                    str(P)], check=True, capture_output=True)
    run = subprocess.run(
        [rp_run, plan, "--input", f"tokens={models}/llama_op17.input.npy",
         "--labels", f"{models}/llama_op17.labels.npy", "--init-weights",
         f"{work}/init.safetensors", "--seed", str(SEED), "--dump-grads",
         f"{work}/grads.safetensors"], check=True, capture_output=True,
        text=True)
    got_loss = float(re.search(r"step 0 loss (\S+)", run.stdout).group(1))
    got = rp_safetensors.read(f"{work}/grads.safetensors")
    worst, failed = 0.0, sorted(set(got) - set(init))
    for w, (a, b) in adapters.items():
        for suffix, t in ((".lora_A", a), (".lora_B", b)):
            if w + suffix not in got:
                failed.append(w + suffix)
                continue
            ref = t.grad.numpy()
            err = np.linalg.norm(got[w + suffix] - ref) / np.linalg.norm(ref)
            worst = max(worst, err)
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
