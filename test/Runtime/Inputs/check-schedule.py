"""Checks rp-run --metrics files against transformers' schedules: for each
FILE KIND WARMUP TOTAL, every step's lr equals get_{KIND}_schedule_with_warmup's
(base lr 1e-2) within 1e-12, the gradient norms are positive, and the loss's
weights are step k-1's (async) or k's (sync)."""
import json
import sys

import torch
from transformers import (get_cosine_schedule_with_warmup,
                          get_linear_schedule_with_warmup)

args = sys.argv[1:]
for i in range(0, len(args), 4):
    path, kind, warmup, total = args[i], args[i + 1], int(args[i + 2]), int(args[i + 3])
    lines = [json.loads(l) for l in open(path)]
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1e-2)
    make = {"cosine": get_cosine_schedule_with_warmup,
            "linear": get_linear_schedule_with_warmup}[kind]
    sched = make(opt, warmup, total)
    want = []
    for _ in lines:
        want.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    lr_ok = all(abs(l["lr"] - w) <= 1e-12 for l, w in zip(lines, want))
    norm_ok = all(l["grad_norm"] > 0 for l in lines)
    sync = all(l["loss_at_weights"] == l["step"] for l in lines)
    stale = all(l["loss_at_weights"] == max(l["step"] - 1, 0) for l in lines)
    print(f"{kind}: {len(lines)} steps, lr as transformers' within 1e-12: "
          f"{lr_ok}, grad_norm > 0: {norm_ok}, loss_at_weights "
          + ("k" if sync and not stale else "k-1" if stale else "??")
          + ": True")
