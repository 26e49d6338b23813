"""The check the MoE model tests share: train a plan of SRC on 1 device, compare
its loss and gradients with PyTorch's, and 2 and 4 devices with 1 bitwise."""
import numpy as np

import rp
from rp import safetensors as rp_safetensors


def run(src, out, name, devices, inputs, labels, microbatches, steps=2,
        loss=None):
    """Losses (as printed) and step-0 gradients of a sync run on DEVICES;
    LOSS is rp-compile's --loss (None: its default)."""
    grads = out / f"{name}-{devices}.safetensors"
    plan = rp.compile(src, out / "plans" / f"{name}-{devices}.rpplan",
                      devices=devices, microbatches=microbatches, loss=loss)
    losses = [f"{v:.9g}" for v in rp.train(plan, inputs, labels, steps=steps,
                                           sync=True, dump_grads=grads)]
    return losses, rp_safetensors.read(grads)


def check(tag, src, out, inputs, labels, microbatches, ref_loss, ref_grads):
    """Prints TAG's loss and gradient comparisons and the bitwise lines."""
    name = tag.replace("/", "-")
    one, grads = run(src, out, name, 1, inputs, labels, microbatches)
    loss_err = abs(float(one[0]) - ref_loss) / abs(ref_loss)
    errs = {n: np.linalg.norm(grads[n] - g) / np.linalg.norm(g)
            for n, g in ref_grads.items() if n in grads}
    worst = max(errs, key=errs.get)
    print(f"{tag}: loss within 1e-4: {loss_err <= 1e-4} "
          f"(rp {one[0]}, torch {ref_loss:.9g})")
    print(f"{tag}: gradients {len(errs)} of {len(ref_grads)} within 1e-4: "
          f"{all(e <= 1e-4 for e in errs.values())} "
          f"(worst {errs[worst]:.2e}, {worst})")
    for devices in (2, 4):
        losses, g = run(src, out, name, devices, inputs, labels, microbatches)
        same = losses == one and sorted(g) == sorted(grads) and all(
            np.array_equal(g[n], grads[n]) for n in grads)
        print(f"{tag}: {devices} devices bitwise: {same}"
              + ("" if same else f" (losses {losses} vs {one})"))
