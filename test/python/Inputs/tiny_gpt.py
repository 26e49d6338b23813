"""A small GPT written with torch.nn modules, for the rp.trace tests:
nn.Embedding (tied with the LM head), nn.LayerNorm, nn.Linear, nn.GELU in
an nn.Sequential MLP, causal attention written out with a registered mask
buffer, blocks in an nn.ModuleList."""

import math

import torch
import torch.nn as nn


class Attention(nn.Module):
    def __init__(self, d, n_head, block_size):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.register_buffer(
            "mask", torch.tril(torch.ones(block_size, block_size)).bool())

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        q = q.view(b, s, self.n_head, d // self.n_head).transpose(1, 2)
        k = k.view(b, s, self.n_head, d // self.n_head).transpose(1, 2)
        v = v.view(b, s, self.n_head, d // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.n_head))
        att = att.masked_fill(~self.mask[:s, :s], float("-inf"))
        y = torch.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).reshape(b, s, d))


class Block(nn.Module):
    def __init__(self, d, n_head, block_size):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = Attention(d, n_head, block_size)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(),
                                 nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab=64, block_size=16, n_layer=2, n_head=4, d=32):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(block_size, d)
        self.h = nn.ModuleList(
            [Block(d, n_head, block_size) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied

    def forward(self, tokens):
        b, s = tokens.shape
        pos = torch.arange(0, s, dtype=torch.long)
        x = self.wte(tokens) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def batch(vocab=64, b=2, s=16, seed=0):
    """Tokens and next-token labels, every fifth label ignored (-100)."""
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, vocab, (b, s), generator=g)
    labels = torch.randint(0, vocab, (b, s), generator=g)
    labels.view(-1)[::5] = -100
    return tokens, labels


def reference(model, tokens, labels):
    """PyTorch's step-0 loss (mean over non-ignored labels) and the
    gradient of every parameter by name."""
    model.zero_grad()
    logits = model(tokens)
    loss = nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
        ignore_index=-100)
    loss.backward()
    grads = {n: p.grad.detach().double().numpy()
             for n, p in model.named_parameters()}
    model.zero_grad()
    return loss.item(), grads


def make_distinct(model, seed=1):
    """Adds a little noise to every parameter: the ONNX exporter merges
    initializers with equal values (fresh LayerNorm weights are all ones),
    which would tie parameters on the ONNX path only."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p in model.named_parameters():
            p.add_(0.02 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return model


def train_on_devices(src, out, name, tokens, labels, devices=(1, 2)):
    """One step of the traced graph SRC compiled for each device count (2
    microbatches): {devices: (loss, gradients by name)}."""
    import rp
    from rp import safetensors
    runs = {}
    for g in devices:
        plan = rp.compile(src, out / f"{name}-{g}.rpplan", devices=g,
                          microbatches=2)
        dump = out / f"{name}-{g}.safetensors"
        loss = list(rp.train(plan, {"tokens": tokens}, labels, steps=1,
                             sync=True, dump_grads=dump))[0]
        runs[g] = (loss, safetensors.read(dump))
    return runs
