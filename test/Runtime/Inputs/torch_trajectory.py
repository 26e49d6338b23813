"""Training trajectories of rp against torch.optim on the GPT of
make_models.py (the same weights as gpt_op17.onnx).

Usage: torch_trajectory.py RP_COMPILE RP_RUN MODELS_DIR WORK_DIR

For M = 1, 2 and 3 microbatches (a global batch of M x 2 sequences), the
step-0 loss of rp equals PyTorch's loss on the whole global batch
(token-weighted, ignored labels included). In --sync mode, 5 steps of AdamW
and of SGD with momentum give rp the per-step losses torch.optim gives.
Prints one line per check; exits 1 when a check fails.
"""

import os
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../Import/ONNX"))
import make_models  # noqa: E402


def gpt():
    GPT = make_models.define_models(torch)[0]
    torch.manual_seed(0)
    model = make_models.make_distinct(torch, GPT(), seed=100)
    return model.eval()


def batch(m, seed):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, 64, (2 * m, 16), generator=g)
    labels = torch.randint(0, 64, (2 * m, 16), generator=g)
    labels.view(-1)[::7] = -100
    return tokens, labels


def torch_losses(tokens, labels, steps, make_opt, clip=0.0):
    model = gpt()
    opt = make_opt(model.parameters())
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        logits = model(tokens)
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, 64), labels.reshape(-1), ignore_index=-100)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        losses.append(loss.item())
    return losses


def rp_losses(rp_compile, rp_run, models, work, m, tokens, labels, args):
    plan = os.path.join(work, f"gpt.m{m}.rpplan")
    if not os.path.exists(plan):
        subprocess.run([rp_compile, os.path.join(models, "gpt_op17.onnx"),
                        "-o", plan, "--microbatches", str(m)], check=True,
                       capture_output=True)
    np.save(os.path.join(work, "tokens.npy"), tokens.numpy())
    np.save(os.path.join(work, "labels.npy"), labels.numpy())
    out = subprocess.run(
        [rp_run, plan, "--input", f"tokens={work}/tokens.npy", "--labels",
         f"{work}/labels.npy", "--sync", *args], check=True,
        capture_output=True, text=True).stdout
    return [float(line.split()[3]) for line in out.splitlines()]


def main(rp_compile, rp_run, models, work):
    os.makedirs(work, exist_ok=True)
    failed = False

    def check(what, rp, ref, tol):
        nonlocal failed
        err = max(abs(a - b) / abs(b) for a, b in zip(rp, ref))
        ok = len(rp) == len(ref) and err <= tol
        failed |= not ok
        print(f"{'ok' if ok else 'MISMATCH'}: {what}: max relative "
              f"difference {err:.2e} over {len(ref)} steps (tolerance {tol:g})")

    for m in (1, 2, 3):
        tokens, labels = batch(m, seed=20 + m)
        ref = torch_losses(tokens, labels, 1,
                           lambda p: torch.optim.SGD(p, lr=0.0))
        rp = rp_losses(rp_compile, rp_run, models, work, m, tokens, labels,
                       ["--steps", "1"])
        check(f"step-0 loss with M={m}", rp, ref, 1e-5)

    tokens, labels = batch(2, seed=30)
    ref = torch_losses(tokens, labels, 5, lambda p: torch.optim.AdamW(
        p, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2))
    rp = rp_losses(rp_compile, rp_run, models, work, 2, tokens, labels,
                   ["--steps", "5", "--lr", "1e-3"])
    check("AdamW, 5 steps, M=2", rp, ref, 1e-4)

    ref = torch_losses(tokens, labels, 5, lambda p: torch.optim.SGD(
        p, lr=1e-2, momentum=0.9))
    rp = rp_losses(rp_compile, rp_run, models, work, 2, tokens, labels,
                   ["--steps", "5", "--optimizer", "sgd", "--lr", "1e-2",
                    "--momentum", "0.9"])
    check("SGD with momentum, 5 steps, M=2", rp, ref, 1e-4)
    ref = torch_losses(tokens, labels, 4, lambda p: torch.optim.AdamW(
        p, lr=1e-3), clip=0.05)
    rp = rp_losses(rp_compile, rp_run, models, work, 2, tokens, labels,
                   ["--steps", "4", "--lr", "1e-3", "--clip-grad-norm", "0.05"])
    check("AdamW with global-norm clipping 0.05, 4 steps, M=2", rp, ref, 1e-4)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
