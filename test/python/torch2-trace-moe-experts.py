# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t | FileCheck %s

# DeepSeek-V3's routing (sigmoid scores, a correction bias, group-limited
# top-k) over the expert forms beside SiLU/GELU gated MLPs: HY-V4's clamped
# SwiGLU (gate clamped above, up to +-swiglu_limit, no act_fn),
# Nemotron-H's ungated experts (one up projection, squared ReLU) and
# Inkling 2's soft-capped SwiGLU under a router with no groups (one group;
# the weights always renormalised, with no norm_topk_prob). Each is
# transformers 5's own MoE block (config shrunk by bench/families.py's
# rule, weights random), two of them in
# a small LM traced on one row and trained on two microbatches (the
# limit and the caps lowered so that they bind): the loss
# and every gradient equal PyTorch's within 1e-4 on 1 device, and 2 devices
# are bitwise equal to 1. Before, the first two were "its experts are not
# stacked [E, 2F, H] / [E, H, F] gated MLPs with a SiLU or GELU
# activation" and Inkling 2's "its output is not the top-2
# softmax-weighted sum of gated-MLP experts". MiniMax-M3's experts (GPT-OSS's
# clamped gate, (up + 1) g sigmoid(alpha g), halves not interleaved) map
# alone, its router (a sigmoid, a bias, no groups, no score_fn) traced op by
# op; before, the same "not the top-2 softmax-weighted sum" error. Aria's
# experts store their stacks transposed ([E, H, 2F] / [E, F, H],
# transformers' is_transposed): they map as rp.moe ops on a transpose of
# each parameter, beside its shared experts; before, "unsupported op
# aten.sort.default" (the grouped_mm implementation's sort). DeepSeek-V4's
# blocks need the token ids (hash routing: a frozen token -> experts
# table) or route by sqrt-softplus scores plus a bias; their experts alone
# map, the routers traced op by op, the SwiGLU clamp (`limit`, lowered to
# bind) included; before, "running it on random tokens to find its form
# failed with AttributeError". DBRX's experts hold three flat [E x F, H]
# parameters (rp._moe_stacked: views of them as the stacks; its router's
# weights over their L1 norm traced op by op) and LongCat-Flash's add
# identity ("zero") experts past the routed ones; before, both "reads the
# value of a tensor" (the eager loop over the experts hit).

import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

here = Path(__file__).resolve().parent
sys.path.insert(0, str(here.parents[1] / "bench"))
sys.path.insert(0, str(here / "Inputs"))
import families  # noqa: E402
import rp  # noqa: E402
import tiny_gpt  # noqa: E402
from transformers import (AriaTextConfig, DbrxConfig,  # noqa: E402
                          DeepseekV4Config, HYV4Config, LongcatFlashConfig, Inkling2TextConfig,
                          MiniMaxM3VLTextConfig, NemotronHConfig)
from transformers.models.deepseek_v4.modeling_deepseek_v4 import \
    DeepseekV4SparseMoeBlock  # noqa: E402
from transformers.models.aria.modeling_aria import \
    AriaTextMoELayer  # noqa: E402
from transformers.models.dbrx.modeling_dbrx import DbrxFFN  # noqa: E402
from transformers.models.hy_v4.modeling_hy_v4 import HYV4MoE  # noqa: E402
from transformers.models.longcat_flash.modeling_longcat_flash import \
    LongcatFlashMoE  # noqa: E402
from transformers.models.inkling2.modeling_inkling2 import \
    Inkling2SparseMoeBlock  # noqa: E402
from transformers.models.minimax_m3_vl.modeling_minimax_m3_vl import \
    MiniMaxM3VLSparseMoeBlock  # noqa: E402
from transformers.models.nemotron_h.modeling_nemotron_h import \
    NemotronHMoE  # noqa: E402

out = Path(sys.argv[1])
V = 64


class LM(nn.Module):
    def __init__(self, make, hidden, ids=False):
        super().__init__()
        self.emb = nn.Embedding(V, hidden)
        self.blocks = nn.ModuleList([make(), make()])
        self.head = nn.Linear(hidden, V)
        self.ids = ids

    def forward(self, tokens):
        h = self.emb(tokens)
        for b in self.blocks:
            h = h + (b(h, tokens) if self.ids else b(h))
        return self.head(h)


def check(name, config, make, ids=False, shrunk=None):
    config = families.shrink(config)
    if shrunk is not None:
        shrunk(config)
    torch.manual_seed(0)
    model = LM(lambda: make(config), config.hidden_size, ids)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.3)
        for n, b in model.named_buffers():
            if "correction_bias" in n:
                b.normal_(0, 0.1)
            if "tid2eid" in n:  # a hash router's token -> experts table
                b.copy_(torch.stack([torch.randperm(b.max() + 4)[:b.shape[1]]
                                     for _ in range(b.shape[0])]) % 4)
    tokens, labels = tiny_gpt.batch(vocab=V)
    ref_loss, ref = tiny_gpt.reference(model, tokens, labels)
    src = rp.trace(model, (tokens[:1],), out / name)
    runs = tiny_gpt.train_on_devices(src, out, name, tokens, labels)
    loss, grads = runs[1]
    errs = {n: np.linalg.norm(grads[n] - g) /
            max(np.linalg.norm(g), 1e-30) for n, g in ref.items()
            if n in grads and np.linalg.norm(g) > 0}
    loss2, grads2 = runs[2]
    bitwise = loss2 == loss and sorted(grads2) == sorted(grads) and all(
        np.array_equal(grads2[n], grads[n]) for n in grads)
    print(f"{name}: loss within 1e-4: "
          f"{abs(loss - ref_loss) <= 1e-4 * abs(ref_loss)}; gradients "
          f"{len(errs)} within 1e-4: {all(e <= 1e-4 for e in errs.values())}"
          f" (worst {max(errs.values()):.1e}); 2 devices bitwise: {bitwise}")


hy = HYV4Config()
hy.swiglu_limit = 0.5
# CHECK: hy_v4: loss within 1e-4: True; gradients {{[0-9]+}} within 1e-4: True {{.*}}; 2 devices bitwise: True
check("hy_v4", hy, HYV4MoE)
# CHECK: nemotron_h: loss within 1e-4: True; gradients {{[0-9]+}} within 1e-4: True {{.*}}; 2 devices bitwise: True
check("nemotron_h", NemotronHConfig(), NemotronHMoE)
ink = Inkling2TextConfig()
ink.mlp_gate_softcap, ink.mlp_up_softcap = 1.0, 2.0
# CHECK: inkling2: loss within 1e-4: True; gradients {{[0-9]+}} within 1e-4: True {{.*}}; 2 devices bitwise: True
check("inkling2", ink, Inkling2SparseMoeBlock)
mm = MiniMaxM3VLTextConfig()
mm.swiglu_limit = 0.5
# CHECK: minimax_m3: loss within 1e-4: True; gradients {{[0-9]+}} within 1e-4: True {{.*}}; 2 devices bitwise: True
check("minimax_m3", mm, MiniMaxM3VLSparseMoeBlock)
# CHECK: aria: loss within 1e-4: True; gradients {{[0-9]+}} within 1e-4: True {{.*}}; 2 devices bitwise: True
check("aria", AriaTextConfig(), AriaTextMoELayer)


def dsv4(types):
    def set_types(c):
        c.mlp_layer_types = types
        c.swiglu_limit = 0.5
    return set_types


# CHECK: dsv4_hash: loss within 1e-4: True; gradients {{[0-9]+}} within 1e-4: True {{.*}}; 2 devices bitwise: True
check("dsv4_hash", DeepseekV4Config(),
      lambda c: DeepseekV4SparseMoeBlock(c, 0), ids=True,
      shrunk=dsv4(["hash_moe", "hash_moe"]))
# CHECK: dsv4_topk: loss within 1e-4: True; gradients {{[0-9]+}} within 1e-4: True {{.*}}; 2 devices bitwise: True
check("dsv4_topk", DeepseekV4Config(),
      lambda c: DeepseekV4SparseMoeBlock(c, 0), shrunk=dsv4(["moe", "moe"]))
# CHECK: dbrx: loss within 1e-4: True; gradients {{[0-9]+}} within 1e-4: True {{.*}}; 2 devices bitwise: True
# Top-2 (the default's top-1 weights are p / |p| = 1, whose router
# gradient is zero).
check("dbrx", DbrxConfig(), DbrxFFN,
      shrunk=lambda c: setattr(c.ffn_config, "moe_top_k", 2))
# CHECK: longcat_flash: loss within 1e-4: True; gradients {{[0-9]+}} within 1e-4: True {{.*}}; 2 devices bitwise: True
check("longcat_flash", LongcatFlashConfig(), LongcatFlashMoE)
