# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %PYTHON %s %t | FileCheck %s

# Mixture-of-experts models through rp.trace (rp._moe: blocks found by
# structure, traced as the rp.moe ops): transformers' MixtralForCausalLM
# (tiny config, 4 experts, top-2, distinct random weights) and a plain
# module of a top-k router and a ModuleList of gated-MLP experts whose
# names are nothing like Mixtral's, with GELU, no renormalisation and top-1,
# alone and with a Qwen2-MoE-style shared expert (+ sigmoid(G x) * S(x)).
# On one device with 4 microbatches the step-0 loss and every parameter's
# gradient equal PyTorch autograd's within 1e-4; on 2 and 4 devices in sync
# mode the losses of 2 steps and the step-0 gradients are bitwise those of
# one device. "tie" is Mixtral with experts 1 and 2 given the same router
# row, so that tokens are routed by the tie-break: the loss and gradients
# match PyTorch only if rp breaks it as torch.topk does (the lower index
# first). A block that has the structure but computes something else
# (sigmoid routing weights) is refused by name.

import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import hf_models  # noqa: E402
import moe_check  # noqa: E402
import rp  # noqa: E402
import tiny_gpt  # noqa: E402
import tiny_mixtral  # noqa: E402

out = Path(sys.argv[1])
M = 4
VOCAB = hf_models.VOCAB
tokens, labels = tiny_gpt.batch(vocab=VOCAB, b=M, s=16)
inputs = {"input_ids": tokens}


class Expert(torch.nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.inp = torch.nn.Linear(h, f, bias=False)
        self.out = torch.nn.Linear(f, h, bias=False)
        self.lin = torch.nn.Linear(h, f, bias=False)

    def forward(self, x):
        return self.out(torch.nn.functional.gelu(self.lin(x)) * self.inp(x))


class Block(torch.nn.Module):
    """Top-1 of 3 experts, softmax weights not renormalised. `shared` adds
    a gated shared expert; `sigmoid` weighs experts by a sigmoid (not a
    form rp maps)."""

    def __init__(self, h, variant=None):
        super().__init__()
        self.router = torch.nn.Linear(h, 3, bias=False)
        self.pool = torch.nn.ModuleList(Expert(h, 24) for _ in range(3))
        self.num_experts_per_tok = 1
        self.variant = variant
        if variant == "shared":
            self.common = Expert(h, 20)
            self.common_gate = torch.nn.Linear(h, 1, bias=False)

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        scores = self.router(x)
        p = torch.sigmoid(scores) if self.variant == "sigmoid" else \
            torch.softmax(scores, -1)
        w, idx = p.topk(1, -1)
        y = torch.zeros_like(x)
        for e, ex in enumerate(self.pool):
            tok = (idx[:, 0] == e).nonzero()[:, 0]
            if tok.numel():
                y = y.index_add(0, tok, ex(x[tok]) * w[tok])
        if self.variant == "shared":
            y = y + torch.sigmoid(self.common_gate(x)) * self.common(x)
        return y.reshape(shape)


class Residual(torch.nn.Module):
    def __init__(self, variant):
        super().__init__()
        self.moe = Block(16, variant)

    def forward(self, x):
        return x + self.moe(x)


class Plain(torch.nn.Module):
    def __init__(self, variant=None):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, 16)
        self.layers = torch.nn.ModuleList(Residual(variant) for _ in range(2))
        self.head = torch.nn.Linear(16, VOCAB, bias=False)

    def forward(self, input_ids):
        x = self.emb(input_ids)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def plain(variant=None):
    torch.manual_seed(0)
    return tiny_gpt.make_distinct(Plain(variant))


for name, make in (("mixtral", tiny_mixtral.mixtral), ("plain", plain),
                   ("shared", lambda: plain("shared")),
                   ("tie", lambda: tiny_mixtral.mixtral(True))):
    model = make()
    if name == "tie":
        ties = tiny_mixtral.boundary_ties(model, tokens)
        print(f"tie: tokens routed by a tie: {ties > 0}")
    ref_loss, ref_grads = tiny_gpt.reference(model, tokens, labels)
    src = rp.trace(model, (tokens[:1],), out / name)
    text = src.read_text()
    print(f"{name}: moe ops: {text.count('rp.moe.route ')} routes, "
          f"{text.count('rp.moe.grouped_matmul ')} grouped matmuls")
    moe_check.check(name, src, out, inputs, labels, M, ref_loss,
                    ref_grads)

torch.manual_seed(0)
try:
    rp.trace(Plain("sigmoid"), (tokens[:1],), out / "sigmoid")
    print("sigmoid: traced")
except rp.TraceError as err:
    print(f"sigmoid: {err}")

# CHECK:      mixtral: moe ops: 2 routes, 6 grouped matmuls
# CHECK-NEXT: mixtral: loss within 1e-4: True
# CHECK-NEXT: mixtral: gradients 41 of 41 within 1e-4: True
# CHECK-NEXT: mixtral: 2 devices bitwise: True
# CHECK-NEXT: mixtral: 4 devices bitwise: True
# CHECK-NEXT: plain: moe ops: 2 routes, 6 grouped matmuls
# CHECK-NEXT: plain: loss within 1e-4: True
# CHECK-NEXT: plain: gradients 22 of 22 within 1e-4: True
# CHECK-NEXT: plain: 2 devices bitwise: True
# CHECK-NEXT: plain: 4 devices bitwise: True
# CHECK-NEXT: shared: moe ops: 2 routes, 6 grouped matmuls
# CHECK-NEXT: shared: loss within 1e-4: True
# CHECK-NEXT: shared: gradients 30 of 30 within 1e-4: True
# CHECK-NEXT: shared: 2 devices bitwise: True
# CHECK-NEXT: shared: 4 devices bitwise: True
# CHECK-NEXT: tie: tokens routed by a tie: True
# CHECK-NEXT: tie: moe ops: 2 routes, 6 grouped matmuls
# CHECK-NEXT: tie: loss within 1e-4: True
# CHECK-NEXT: tie: gradients 41 of 41 within 1e-4: True
# CHECK-NEXT: tie: 2 devices bitwise: True
# CHECK-NEXT: tie: 4 devices bitwise: True
# CHECK-NEXT: sigmoid: rp.trace: module 'layers.0.moe' (Block) has a router and 3 experts, but its output is not the top-1 softmax-weighted sum of gated-MLP experts (plus a shared expert) rp maps to its MoE ops
