"""The step-0 check shared by the rp.trace tests: trace -> compile -> one
training step on one device, and the loss and every parameter's gradient
against PyTorch autograd's (DESIGN.md: relative loss error; per tensor
||a - b|| / ||ref||)."""

import inspect
import warnings

import numpy as np
import torch
from rp import safetensors as rp_safetensors

import rp
import tiny_gpt


class TwoBlockLM(torch.nn.Module):
    """The trace-*-ops tests' model: 64 tokens embedded in 16, two
    ``block()``s (the ops under test) and a head."""

    def __init__(self, block):
        super().__init__()
        self.emb = torch.nn.Embedding(64, 16)
        self.blocks = torch.nn.Sequential(block(), block())
        self.head = torch.nn.Linear(16, 64)

    def forward(self, tokens):
        return self.head(self.blocks(self.emb(tokens)))


def print_two_block_check(block, out, name):
    """Prints ``check``'s lines for a TwoBlockLM of ``block`` on tiny_gpt's
    batch, its weights from seed 0."""
    tokens, labels = tiny_gpt.batch()
    torch.manual_seed(0)
    for line in check(TwoBlockLM(block), {"tokens": tokens}, labels, out,
                      name):
        print(line)


def check(model, inputs, labels, out, name, tol=1e-4, onnx_steps=0):
    """``inputs`` maps the names of ``model.forward``'s parameters to
    tensors (one global batch). Returns the lines the tests print: the
    plan, the loss and the worst gradient, with the numbers."""
    ref_loss, ref_grads = tiny_gpt.reference(model, *inputs.values(), labels)
    src = rp.trace(model, tuple(inputs.values()), out / name)
    plan = rp.compile(src, out / "plans" / f"{name}.rpplan")
    summary = rp.driver.last_compile_summary.strip()
    grads_path = out / f"{name}.grads.safetensors"
    losses = list(rp.train(plan, dict(inputs), labels,
                           steps=1, dump_grads=grads_path))
    loss_err = abs(losses[0] - ref_loss) / abs(ref_loss)
    got = rp_safetensors.read(grads_path)
    errs = {n: np.linalg.norm(got[n] - g) / np.linalg.norm(g)
            for n, g in ref_grads.items() if n in got}
    worst = max(errs, key=errs.get)
    lines = [
        f"{name}: compiled {summary.split(': ', 2)[-1].split(' in stages')[0]}",
        f"{name}: loss rp {losses[0]:.6f} torch {ref_loss:.6f}: within {tol:g}: "
        f"{loss_err <= tol} (relative error {loss_err:.2e})",
        f"{name}: gradients: {len(errs)} of {len(ref_grads)}, within {tol:g}: "
        f"{all(e <= tol for e in errs.values())} (worst {errs[worst]:.2e}, {worst})",
    ]
    if onnx_steps:
        lines.append(onnx_matches(model, inputs, labels, plan, out, name,
                                  onnx_steps))
    return lines


def export_onnx(model, inputs, path, training=False):
    """torch.onnx.export at opset 17 with do_constant_folding=False (so
    parameter names survive), in eval mode or, with ``training``, in
    training mode (with dropout 0 both are the training graph; the training
    export lists each Dropout's mask). torch 2's default dynamo exporter
    needs onnxscript and names parameters otherwise, so the TorchScript
    exporter is asked for where the choice exists."""
    extra = {}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        extra["dynamo"] = False
    mode = (torch.onnx.TrainingMode.TRAINING if training else
            torch.onnx.TrainingMode.EVAL)
    # The exporter restores the top module's mode on every submodule
    # (model.train(was_training)): a wrapper left in training mode around
    # an eval-mode model would put the model in training mode after the
    # export (PhiMoE's router then samples its experts). Each module's
    # own mode is restored instead.
    modes = [(m, m.training) for m in model.modules()]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, tuple(inputs.values()), str(path),
                              input_names=list(inputs),
                              output_names=["logits"], opset_version=17,
                              do_constant_folding=False, training=mode,
                              **extra)
    finally:
        for m, was in modes:
            m.training = was


def onnx_matches(model, inputs, labels, plan, out, name, steps, tol=1e-5):
    """The traced plan and the same model exported to ONNX in eval and in
    training mode (export_onnx), each compiled from the .onnx, train
    ``steps`` sync steps to the same losses within ``tol`` (relative, per
    step)."""
    traced = list(rp.train(plan, dict(inputs), labels, steps=steps,
                           sync=True))
    runs = {}
    for mode in ("eval", "training"):
        onnx_path = out / f"{name}-{mode}.onnx"
        export_onnx(model, inputs, onnx_path, training=mode == "training")
        onnx_plan = rp.compile(onnx_path,
                               out / "plans" / f"{name}-{mode}.rpplan")
        runs[mode] = list(rp.train(onnx_plan, dict(inputs), labels,
                                   steps=steps, sync=True))
    ok = all(len(r) == steps for r in runs.values())
    diff = max(abs(a - b) / abs(b) for r in runs.values()
               for a, b in zip(traced, r))
    return (f"{name}: traced vs onnx (eval and training exports): {steps} "
            f"steps, within {tol:g}: {ok and diff <= tol} (max relative "
            f"difference {diff:.2e}; losses {traced} / {runs})")
