"""One bench/families.py family through rp's import paths, checked as
bench/families.py checks it: the loss within 1e-4 of PyTorch's, every
gradient by its parameter name within 1e-4, 4 devices (or as many as the
test asks) bitwise equal to 1; an ONNX path is told each embedding's
padding row (--padding-idx) as the bench tells it. Shared by the family
tests that check a model's paths one by one."""

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
import families  # noqa: E402
import rp  # noqa: E402
from rp import safetensors as rp_safetensors  # noqa: E402


def inputs():
    """The tokens and labels every check of this harness trains on."""
    torch.manual_seed(1)
    tokens = torch.randint(0, families.VOCAB, (4, 16))
    labels = torch.randint(0, families.VOCAB, (4, 16))
    return tokens, labels


def check_paths(model, out, paths=("trace", "torchscript"), devices=4):
    """Prints, per path, whether the loss matches, how many gradients do,
    and whether `devices` devices are bitwise equal to 1."""
    tokens, labels = inputs()
    ref_loss, ref_grads = families.reference(model, tokens, labels)

    def train(src, tag, devices):
        flags = families.padding_flags(model, src) if tag != "trace" else []
        plan = rp.compile(src, out / f"{tag}-{devices}.rpplan",
                          devices=devices, microbatches=4,
                          padding_idx=flags or None)
        dump = out / f"{tag}-{devices}.safetensors"
        loss = list(rp.train(plan, {"input_ids": tokens}, labels, steps=1,
                             sync=True, dump_grads=dump))[0]
        return loss, rp_safetensors.read(dump)

    # Relative to the larger of the gradient's norm and 1% of the whole
    # gradient's, as bench/families.py measures (a gradient zero in exact
    # arithmetic is float noise on both sides).
    floor = 0.01 * np.sqrt(sum(np.linalg.norm(g) ** 2
                               for g in ref_grads.values()))
    for path in paths:
        src = families._source(path, model, tokens, out)
        loss, grads = train(src, path, 1)
        # A tied weight may reach rp under another of its names (as the
        # bench reads it).
        params = dict(model.named_parameters())
        for n in ref_grads:
            alt = [a for a in families.aliases(model, params[n]) if a in grads]
            if n not in grads and alt:
                grads[n] = grads[alt[0]]
        errs = {n: np.linalg.norm(grads[n].astype(np.float64) - g)
                / max(np.linalg.norm(g), floor)
                for n, g in ref_grads.items() if n in grads}
        good = sum(e <= 1e-4 for e in errs.values())
        loss4, grads4 = train(src, path, devices)
        for n in ref_grads:
            alt = [a for a in families.aliases(model, params[n])
                   if a in grads4]
            if n not in grads4 and alt:
                grads4[n] = grads4[alt[0]]
        bitwise = loss4 == loss and sorted(grads4) == sorted(grads) and all(
            np.array_equal(grads4[n], grads[n]) for n in grads)
        print(f"{path}: loss {abs(loss - ref_loss) <= 1e-4 * abs(ref_loss)}, "
              f"{good} of {len(ref_grads)} gradients within 1e-4, "
              f"{devices} devices bitwise {bitwise}")
    return tokens
