"""Shared by the token-slice model tests (torch2-token-slices-compile.py,
torch2-token-slices-moe.py): one step of a plan on the host with its
gradients, the checks a sliced plan is held to against the unsliced one
and PyTorch, and the loop that runs them for each device count and
slicing."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from safetensors.numpy import load_file

import rp
from hf_models import LogitsOnly

S, VOCAB = 48, 64  # no feature dimension is 48: the slices retype only it
SLICINGS = ("2", "20,16,12")
RACES = Path(__file__).resolve().parents[2] / "Target/Inputs/plan_races.py"


def logits_only(lm):
    lm.eval()
    return LogitsOnly(lm)


def step(plan, tokens, labels):
    """One step's loss and weight gradients (rp-run --dump-grads)."""
    grads = plan.with_suffix(".grads.safetensors")
    loss = list(rp.train(plan, {"input_ids": tokens}, labels, steps=1,
                         sync=True, dump_grads=str(grads)))[0]
    return loss, load_file(str(grads))


def worst(grads, ref):
    """The largest difference of any gradient, relative to the largest
    magnitude of the reference's."""
    assert sorted(grads) == sorted(ref), (sorted(grads), sorted(ref))
    return max(np.abs(grads[k].astype(np.float64) - ref[k]).max()
               / max(np.abs(ref[k]).max(), 1e-30) for k in ref)


def no_races(plan):
    """plan_races.py on the plan: every two jobs touching a buffer, one
    writing, ordered by the queues and events (staged-plan.test's check)."""
    desc = plan.with_suffix(".json")
    desc.write_text(rp.run_tool("rp-run", [str(plan), "--describe=json"])
                    .stdout)
    return subprocess.run([sys.executable, str(RACES), str(desc)],
                          capture_output=True).returncode == 0


def bitwise(a, b):
    return all(np.array_equal(a[k], b[k]) for k in b)


def check_slicings(name, model, out, configs, one_device=None):
    """Traces MODEL on one random sequence and, for each (devices, stages)
    of CONFIGS and each slicing, prints whether the sliced plan's step is
    the unsliced plan's (loss and every gradient within 1e-5, some bits
    different, no races), on 1 device PyTorch's within 1e-4 (and
    ONE_DEVICE(plan)'s words), on more 1 device's bit for bit. Returns the
    traced graph and the sequence's tokens and labels."""
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, VOCAB, (1, S), generator=g)
    labels = torch.randint(0, VOCAB, (1, S), generator=g)
    ref = torch.nn.functional.cross_entropy(model(tokens).reshape(-1, VOCAB),
                                            labels.reshape(-1))
    ref.backward()
    ref_grads = {n: p.grad.double().numpy()
                 for n, p in model.named_parameters() if p.grad is not None}
    src = rp.trace(model, (tokens,), out / f"{name}-trace")
    first = {}
    for devices, stages in configs:
        flags = ["--stages", stages] if stages else []
        plain = rp.compile(src, out / f"{name}-{devices}.rpplan",
                           devices=devices, microbatches=1, extra_args=flags)
        loss, grads = step(plain, tokens.numpy(), labels.numpy())
        for slices in SLICINGS:
            plan = rp.compile(src, out / f"{name}-{devices}-{slices}.rpplan",
                              devices=devices, microbatches=1,
                              extra_args=flags + ["--token-slices", slices])
            sl, sg = step(plan, tokens.numpy(), labels.numpy())
            line = (f"{name} {devices} devices, slices {slices}: loss within "
                    f"1e-5 {abs(sl - loss) <= 1e-5 * abs(loss)}, "
                    f"{len(sg)} gradients within 1e-5 "
                    f"{worst(sg, grads) <= 1e-5}, reordered "
                    f"{not bitwise(sg, grads)}, no races {no_races(plan)}")
            if devices == 1:
                first[slices] = sg
                if one_device:
                    line += ", " + one_device(plan)
                line += (f", PyTorch's within 1e-4 "
                         f"{abs(sl - ref.item()) <= 1e-4 * abs(ref.item())} "
                         f"{worst(sg, ref_grads) <= 1e-4}")
            else:
                line += f", bitwise 1 device's {bitwise(sg, first[slices])}"
            print(line, flush=True)
    return src, tokens, labels
