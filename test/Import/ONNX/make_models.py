#!/usr/bin/env python3
"""Generates the ONNX models that rp-import is tested on.

Usage: make_models.py OUT_DIR

Writes into OUT_DIR (created if missing), for every model NAME below,
NAME.onnx, NAME.input.npy (the single input) and NAME.output.npy (the torch
output for that input):

  gpt_op14, gpt_op17          GPT-2-style LM (tied lm_head), static [2,16]
  llama_op14, llama_op17      Llama-style LM (RMSNorm, GQA, RoPE), static [2,16]
  vit_op14, vit_op17          torchvision VisionTransformer, static [2,3,32,32]
  encoder_op17                Embedding + nn.TransformerEncoder + Linear, [2,8]
  gpt_dynamic_op17            the GPT of gpt_op17 with dynamic batch and seq
  gpt_noname_op17             gpt_op17 with every node name cleared
  gpt_external_op17           gpt_op17 with its tensors in
                              gpt_external_op17.onnx.data

Every export runs with do_constant_folding=False so initializer names are the
module's parameter names, passes onnx.checker, and (when onnxruntime can be
imported) matches torch within 1e-4 max abs difference. The output is
deterministic. Files are written into a temporary folder inside OUT_DIR and
moved into place with os.replace. On success one summary line is printed; on
failure a message goes to stderr and the exit status is 1.
"""

import contextlib
import io
import os
import shutil
import sys
import tempfile
import time
import warnings

from onnx_models import define_models

TOLERANCE = 1e-4


class Failure(Exception):
    pass


# ---------------------------------------------------------------------------
# Quiet execution: torch.onnx prints warnings from Python and from C++. Both
# go to a log that is shown only when something fails.
# ---------------------------------------------------------------------------


@contextlib.contextmanager
def captured_fds(log):
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


# ---------------------------------------------------------------------------
# Export and checks
# ---------------------------------------------------------------------------


class Builder:
    def __init__(self, torch, onnx, np, ort, work_dir):
        self.torch = torch
        self.onnx = onnx
        self.np = np
        self.ort = ort
        self.work_dir = work_dir
        self.files = []  # names written into work_dir, in order
        self.models = []

    def path(self, name):
        return os.path.join(self.work_dir, name)

    def export(self, module, example, name, opset, input_name, dynamic=False):
        """Exports module on example; returns the ModelProto (not yet saved)."""
        torch = self.torch
        module.eval()
        dynamic_axes = None
        if dynamic:
            dynamic_axes = {
                input_name: {0: "batch", 1: "seq"},
                "logits": {0: "batch", 1: "seq"},
            }
        errors = []
        # Eval mode first; training mode where eval does not export (fused
        # fast paths). All the dropouts here have p = 0, so the outputs agree.
        for mode in (torch.onnx.TrainingMode.EVAL, torch.onnx.TrainingMode.TRAINING):
            buf = io.BytesIO()
            try:
                torch.onnx.export(
                    module, (example,), buf, opset_version=opset,
                    do_constant_folding=False, training=mode,
                    input_names=[input_name], output_names=["logits"],
                    dynamic_axes=dynamic_axes,
                )
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append("%s: %s: %s" % (mode, type(e).__name__, e))
                continue
            module.eval()  # export in TRAINING mode leaves the module as it was
            model = self.onnx.load_model_from_string(buf.getvalue())
            try:
                self.onnx.checker.check_model(model)
            except Exception as e:  # noqa: BLE001
                raise Failure("%s: onnx.checker failed: %s" % (name, e))
            self.check_initializers(name, module, model)
            return model
        raise Failure("%s: torch.onnx.export failed:\n  %s" % (name, "\n  ".join(errors)))

    def check_initializers(self, name, module, model):
        """Every parameter must be an initializer under its own name, and
        every initializer must be a parameter or a persistent buffer."""
        inits = {t.name for t in model.graph.initializer}
        params = {n for n, _ in module.named_parameters()}  # tied ones once
        state = set(module.state_dict().keys())
        missing = sorted(params - inits)
        if missing:
            raise Failure(
                "%s: parameters missing from the initializers (merged by the "
                "exporter?): %s" % (name, ", ".join(missing))
            )
        extra = sorted(inits - state)
        if extra:
            raise Failure(
                "%s: initializers that are not parameters or buffers: %s"
                % (name, ", ".join(extra))
            )

    def reference(self, module, example):
        with self.torch.no_grad():
            module.eval()
            return module(example).detach().numpy().astype(self.np.float32)

    def run_ort(self, name, model_path, input_name, array):
        opts = self.ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        try:
            sess = self.ort.InferenceSession(
                model_path, sess_options=opts, providers=["CPUExecutionProvider"]
            )
            return sess.run(["logits"], {input_name: array})[0]
        except Exception as e:  # noqa: BLE001
            raise Failure("%s: onnxruntime failed: %s" % (name, e))

    def verify(self, name, model_path, input_name, array, expected):
        if self.ort is None:
            return
        got = self.run_ort(name, model_path, input_name, array)
        if got.shape != expected.shape:
            raise Failure(
                "%s: onnxruntime output shape %s, torch %s"
                % (name, got.shape, expected.shape)
            )
        diff = float(self.np.max(self.np.abs(got.astype(self.np.float64) - expected)))
        if not diff < TOLERANCE:
            raise Failure(
                "%s: onnxruntime differs from torch: max abs diff %g >= %g"
                % (name, diff, TOLERANCE)
            )

    def save(self, name, model, input_name, array, expected, external=False):
        file_name = name + ".onnx"
        model_path = self.path(file_name)
        if external:
            data_name = file_name + ".data"
            self.onnx.save_model(
                model, model_path, save_as_external_data=True,
                all_tensors_to_one_file=True, location=data_name, size_threshold=0,
            )
            self.files.append(data_name)
            self.onnx.checker.check_model(model_path)
        else:
            self.onnx.save_model(model, model_path)
        self.files.append(file_name)
        self.np.save(self.path(name + ".input.npy"), array)
        self.np.save(self.path(name + ".output.npy"), expected)
        self.files += [name + ".input.npy", name + ".output.npy"]
        self.verify(name, model_path, input_name, array, expected)
        self.models.append(name)
        return model_path


def save_training_reference(b, name, module, example, classes, seed):
    """Writes NAME.labels.npy (with some -100 entries, which are ignored),
    NAME.loss.npy and NAME.grads.npz: PyTorch's step-0 cross-entropy
    (token-weighted mean) and the gradient of every parameter by name, for
    rp's gradient checks."""
    torch, np = b.torch, b.np
    g = torch.Generator().manual_seed(seed)
    logits = module(example)
    shape = logits.shape[:-1]
    labels = torch.randint(0, classes, shape, generator=g, dtype=torch.int64)
    labels.view(-1)[::5] = -100
    module.zero_grad()
    loss = torch.nn.functional.cross_entropy(
        logits.reshape(-1, classes), labels.reshape(-1), ignore_index=-100)
    loss.backward()
    grads = {n: p.grad.detach().numpy().astype(np.float32)
             for n, p in module.named_parameters() if p.grad is not None}
    np.save(b.path(name + ".labels.npy"), labels.numpy())
    np.save(b.path(name + ".loss.npy"), np.array(loss.item(), np.float64))
    np.savez(b.path(name + ".grads.npz"), **grads)
    b.files += [name + ".labels.npy", name + ".loss.npy", name + ".grads.npz"]
    module.zero_grad()


def make_distinct(torch, module, seed):
    """Adds a little noise to every parameter. In eval mode the exporter
    merges initializers with equal values (fresh LayerNorm weights are all
    ones, biases zeros, nn.TransformerEncoder layers are deep copies of each
    other) and leaves Identity nodes behind; distinct values keep one
    initializer per parameter under its own name. Tied parameters are
    visited once and stay tied."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p in module.named_parameters():
            p.add_(0.02 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return module


def build_all(torch, onnx, np, ort, work_dir):
    GPT, Llama, Encoder, vit = define_models(torch)
    b = Builder(torch, onnx, np, ort, work_dir)

    def tokens(vocab, batch, seq, seed):
        g = torch.Generator().manual_seed(seed)
        return torch.randint(0, vocab, (batch, seq), generator=g, dtype=torch.int64)

    # GPT-2 style.
    torch.manual_seed(0)
    gpt = make_distinct(torch, GPT(), seed=100)
    gpt_in = tokens(64, 2, 16, seed=1)
    gpt_out = b.reference(gpt, gpt_in)
    gpt_np = gpt_in.numpy()
    for opset in (14, 17):
        name = "gpt_op%d" % opset
        model = b.export(gpt, gpt_in, name, opset, "tokens")
        b.save(name, model, "tokens", gpt_np, gpt_out)
        if opset == 17:
            gpt17 = model
            save_training_reference(b, name, gpt, gpt_in, 64, seed=11)

    # Same weights, dynamic batch and sequence.
    name = "gpt_dynamic_op17"
    gpt.expand_positions = True
    model = b.export(gpt, gpt_in, name, 17, "tokens", dynamic=True)
    path = b.save(name, model, "tokens", gpt_np, gpt_out)
    if ort is not None:  # another shape through the same file
        other_in = tokens(64, 3, 5, seed=2)
        b.verify(name + " [3,5]", path, "tokens", other_in.numpy(),
                 b.reference(gpt, other_in))
    gpt.expand_positions = False

    # Node names cleared.
    noname = onnx.ModelProto()
    noname.CopyFrom(gpt17)
    for node in noname.graph.node:
        node.name = ""
    onnx.checker.check_model(noname)
    b.save("gpt_noname_op17", noname, "tokens", gpt_np, gpt_out)

    # External data.
    external = onnx.ModelProto()
    external.CopyFrom(gpt17)
    b.save("gpt_external_op17", external, "tokens", gpt_np, gpt_out, external=True)

    # Llama style.
    torch.manual_seed(0)
    llama = make_distinct(torch, Llama(), seed=101)
    llama_in = tokens(128, 2, 16, seed=3)
    llama_out = b.reference(llama, llama_in)
    for opset in (14, 17):
        name = "llama_op%d" % opset
        model = b.export(llama, llama_in, name, opset, "tokens")
        b.save(name, model, "tokens", llama_in.numpy(), llama_out)
        if opset == 17:
            save_training_reference(b, name, llama, llama_in, 128, seed=12)

    # torchvision ViT.
    torch.manual_seed(0)
    vit_model = make_distinct(torch, vit(), seed=102)
    g = torch.Generator().manual_seed(4)
    vit_in = torch.randn((2, 3, 32, 32), generator=g, dtype=torch.float32)
    vit_out = b.reference(vit_model, vit_in)
    for opset in (14, 17):
        name = "vit_op%d" % opset
        model = b.export(vit_model, vit_in, name, opset, "pixels")
        b.save(name, model, "pixels", vit_in.numpy(), vit_out)
        if opset == 17:
            save_training_reference(b, name, vit_model, vit_in, 10, seed=13)

    # nn.TransformerEncoder.
    torch.manual_seed(0)
    enc = make_distinct(torch, Encoder(), seed=103)
    enc_in = tokens(64, 2, 8, seed=5)
    enc_out = b.reference(enc, enc_in)
    name = "encoder_op17"
    model = b.export(enc, enc_in, name, 17, "tokens")
    b.save(name, model, "tokens", enc_in.numpy(), enc_out)
    save_training_reference(b, name, enc, enc_in, 64, seed=14)

    return b


def main(argv):
    if len(argv) != 2 or argv[1].startswith("-"):
        print("usage: %s OUT_DIR" % os.path.basename(argv[0]), file=sys.stderr)
        return 1
    out_dir = argv[1]
    start = time.monotonic()
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        print("make_models.py: cannot create %s: %s" % (out_dir, e), file=sys.stderr)
        return 1

    try:
        work_dir = tempfile.mkdtemp(prefix=".make_models.", dir=out_dir)
        log = tempfile.TemporaryFile(mode="w+", errors="replace")
    except OSError as e:
        print("make_models.py: cannot write into %s: %s" % (out_dir, e), file=sys.stderr)
        return 1
    try:
        try:
            with captured_fds(log):
                import numpy as np
                import onnx
                import torch

                try:
                    import onnxruntime as ort
                except ImportError:
                    ort = None
                torch.manual_seed(0)
                builder = build_all(torch, onnx, np, ort, work_dir)
        except Exception as e:  # noqa: BLE001
            log.seek(0)
            captured = log.read()
            if captured.strip():
                sys.stderr.write(captured)
                if not captured.endswith("\n"):
                    sys.stderr.write("\n")
            if isinstance(e, Failure):
                print("make_models.py: error: %s" % e, file=sys.stderr)
            else:
                import traceback

                traceback.print_exc()
                print("make_models.py: error: %s: %s" % (type(e).__name__, e),
                      file=sys.stderr)
            return 1
        # External data first, so the model never points at a missing file.
        for f in builder.files:
            os.replace(os.path.join(work_dir, f), os.path.join(out_dir, f))
    finally:
        log.close()
        shutil.rmtree(work_dir, ignore_errors=True)

    print(
        "make_models.py: wrote %d models (%d files) to %s in %.1f s, %s"
        % (len(builder.models), len(builder.files), out_dir, time.monotonic() - start,
           "checked with onnxruntime %s" % ort.__version__ if ort is not None
           else "onnxruntime not available, not run")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
