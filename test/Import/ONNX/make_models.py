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
import math
import os
import shutil
import sys
import tempfile
import time
import warnings

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
# Models
# ---------------------------------------------------------------------------


def define_models(torch):
    nn = torch.nn

    # ----- GPT-2 style ------------------------------------------------------
    class GPTAttention(nn.Module):
        def __init__(self, d, n_head, block_size):
            super().__init__()
            self.n_head = n_head
            self.head_dim = d // n_head
            self.c_attn = nn.Linear(d, 3 * d)
            self.c_proj = nn.Linear(d, d)
            # Persistent buffer, as in GPT-2: exported as an initializer.
            self.register_buffer(
                "bias", torch.tril(torch.ones(block_size, block_size)).bool()
            )

        def forward(self, x):
            b, s, d = x.shape
            q, k, v = self.c_attn(x).split(d, dim=2)
            q = q.view(b, s, self.n_head, self.head_dim).transpose(1, 2)
            k = k.view(b, s, self.n_head, self.head_dim).transpose(1, 2)
            v = v.view(b, s, self.n_head, self.head_dim).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
            mask = self.bias[:s, :s]
            att = att.masked_fill(~mask, float("-inf"))
            att = torch.softmax(att, dim=-1)
            y = att @ v
            y = y.transpose(1, 2).reshape(b, s, d)
            return self.c_proj(y)

    class GPTMLP(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.c_fc = nn.Linear(d, 4 * d)
            self.c_proj = nn.Linear(4 * d, d)

        def forward(self, x):
            x = self.c_fc(x)
            x = 0.5 * x * (
                1.0
                + torch.tanh(
                    math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))
                )
            )
            return self.c_proj(x)

    class GPTBlock(nn.Module):
        def __init__(self, d, n_head, block_size):
            super().__init__()
            self.ln_1 = nn.LayerNorm(d)
            self.attn = GPTAttention(d, n_head, block_size)
            self.ln_2 = nn.LayerNorm(d)
            self.mlp = GPTMLP(d)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            x = x + self.mlp(self.ln_2(x))
            return x

    class GPT(nn.Module):
        def __init__(self, vocab=64, block_size=32, n_layer=2, n_head=4, d=32):
            super().__init__()
            self.wte = nn.Embedding(vocab, d)
            self.wpe = nn.Embedding(block_size, d)
            self.h = nn.ModuleList(
                [GPTBlock(d, n_head, block_size) for _ in range(n_layer)]
            )
            self.ln_f = nn.LayerNorm(d)
            self.lm_head = nn.Linear(d, vocab, bias=False)
            self.lm_head.weight = self.wte.weight  # tied
            # Broadcast the position ids to [batch, seq] explicitly, as some
            # HF models do. The result is the same; the export gains
            # Expand/ConstantOfShape/Equal/Where shape arithmetic (and one
            # Shape even when static), so only the dynamic export sets it.
            self.expand_positions = False

        def forward(self, tokens):
            b, s = tokens.shape
            pos = torch.arange(0, s, dtype=torch.long, device=tokens.device)
            if self.expand_positions:
                pos = pos.unsqueeze(0).expand(b, s)
            x = self.wte(tokens) + self.wpe(pos)
            for block in self.h:
                x = block(x)
            return self.lm_head(self.ln_f(x))

    # ----- Llama / Qwen style -----------------------------------------------
    class RMSNorm(nn.Module):
        def __init__(self, d, eps=1e-6):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(d))

        def forward(self, x):
            # Pow / ReduceMean / Add / Sqrt / Div, then Mul by the weight.
            return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    def rotate_half(x):
        half = x.shape[-1] // 2
        x1 = x[..., :half]
        x2 = x[..., half:]
        return torch.cat((-x2, x1), dim=-1)

    def repeat_kv(x, n_rep):
        b, hkv, s, d = x.shape
        if n_rep == 1:
            return x
        x = x[:, :, None, :, :].expand(b, hkv, n_rep, s, d)
        return x.reshape(b, hkv * n_rep, s, d)

    class LlamaAttention(nn.Module):
        def __init__(self, d, n_head, n_kv_head, max_pos, theta=10000.0):
            super().__init__()
            self.n_head = n_head
            self.n_kv_head = n_kv_head
            self.head_dim = d // n_head
            self.q_proj = nn.Linear(d, n_head * self.head_dim, bias=False)
            self.k_proj = nn.Linear(d, n_kv_head * self.head_dim, bias=False)
            self.v_proj = nn.Linear(d, n_kv_head * self.head_dim, bias=False)
            self.o_proj = nn.Linear(n_head * self.head_dim, d, bias=False)
            inv_freq = 1.0 / (
                theta
                ** (torch.arange(0, self.head_dim, 2, dtype=torch.float32) / self.head_dim)
            )
            t = torch.arange(max_pos, dtype=torch.float32)
            freqs = torch.outer(t, inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1)
            self.register_buffer("cos_cached", emb.cos(), persistent=False)
            self.register_buffer("sin_cached", emb.sin(), persistent=False)

        def forward(self, x):
            b, s, _ = x.shape
            q = self.q_proj(x).view(b, s, self.n_head, self.head_dim).transpose(1, 2)
            k = self.k_proj(x).view(b, s, self.n_kv_head, self.head_dim).transpose(1, 2)
            v = self.v_proj(x).view(b, s, self.n_kv_head, self.head_dim).transpose(1, 2)
            cos = self.cos_cached[:s]
            sin = self.sin_cached[:s]
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            n_rep = self.n_head // self.n_kv_head
            k = repeat_kv(k, n_rep)
            v = repeat_kv(v, n_rep)
            scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
            # Not torch.tensor(min) (an onnx::Where_N initializer) nor a Python
            # scalar (exported as a double Constant that onnxruntime rejects).
            future = torch.triu(torch.full((s, s), 1.0), diagonal=1).bool()
            fill = torch.full((s, s), torch.finfo(torch.float32).min)
            scores = torch.where(future, fill, scores)
            probs = torch.softmax(scores, dim=-1)
            y = torch.matmul(probs, v)
            y = y.transpose(1, 2).reshape(b, s, self.n_head * self.head_dim)
            return self.o_proj(y)

    class LlamaMLP(nn.Module):
        def __init__(self, d, ff):
            super().__init__()
            self.gate_proj = nn.Linear(d, ff, bias=False)
            self.up_proj = nn.Linear(d, ff, bias=False)
            self.down_proj = nn.Linear(ff, d, bias=False)

        def forward(self, x):
            g = self.gate_proj(x)
            return self.down_proj(g * torch.sigmoid(g) * self.up_proj(x))

    class LlamaDecoderLayer(nn.Module):
        def __init__(self, d, n_head, n_kv_head, ff, max_pos):
            super().__init__()
            self.input_layernorm = RMSNorm(d)
            self.self_attn = LlamaAttention(d, n_head, n_kv_head, max_pos)
            self.post_attention_layernorm = RMSNorm(d)
            self.mlp = LlamaMLP(d, ff)

        def forward(self, x):
            x = x + self.self_attn(self.input_layernorm(x))
            x = x + self.mlp(self.post_attention_layernorm(x))
            return x

    class Llama(nn.Module):
        def __init__(self, vocab=128, d=64, n_layer=2, n_head=4, n_kv_head=2, ff=128,
                     max_pos=32):
            super().__init__()
            self.embed_tokens = nn.Embedding(vocab, d)
            self.layers = nn.ModuleList(
                [LlamaDecoderLayer(d, n_head, n_kv_head, ff, max_pos)
                 for _ in range(n_layer)]
            )
            self.norm = RMSNorm(d)
            self.lm_head = nn.Linear(d, vocab, bias=False)

        def forward(self, tokens):
            x = self.embed_tokens(tokens)
            for layer in self.layers:
                x = layer(x)
            return self.lm_head(self.norm(x))

    # ----- nn.TransformerEncoder --------------------------------------------
    class Encoder(nn.Module):
        def __init__(self, vocab=64, d=32):
            super().__init__()
            self.embed = nn.Embedding(vocab, d)
            self.encoder = nn.TransformerEncoder(
                nn.TransformerEncoderLayer(
                    d_model=d, nhead=4, dim_feedforward=64, dropout=0.0,
                    batch_first=True,
                ),
                num_layers=2,
            )
            self.head = nn.Linear(d, vocab)

        def forward(self, tokens):
            return self.head(self.encoder(self.embed(tokens)))

    def vit():
        import torchvision

        return torchvision.models.VisionTransformer(
            image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32,
            mlp_dim=64, num_classes=10,
        )

    return GPT, Llama, Encoder, vit


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
