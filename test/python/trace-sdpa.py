# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: %TORCH2_PYTHON %s %t | FileCheck %s
# RUN: FileCheck %s --check-prefix=IR < %t/causal/model.mlir

# torch 2 only: F.scaled_dot_product_attention (make_fx records
# aten._scaled_dot_product_flash_attention_for_cpu) maps to rp.attention
# with its scale, causal flag and boolean mask; the step-0 loss and
# gradients equal PyTorch autograd's within 1e-4.

import os
import sys
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import step0  # noqa: E402
import tiny_gpt  # noqa: E402


class Att(nn.Module):
    def __init__(self, d=16, h=2, scale=None, causal=False, masked=False):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.h, self.scale = h, scale
        self.causal, self.masked = causal, masked

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.h, d // self.h).permute(
            2, 0, 3, 1, 4)
        mask = None
        if self.masked:
            mask = torch.ones(s, s, dtype=torch.bool).tril()
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                           is_causal=self.causal,
                                           scale=self.scale)
        return x + y.transpose(1, 2).reshape(b, s, d)


class LM(nn.Module):
    def __init__(self, **kw):
        super().__init__()
        self.emb = nn.Embedding(64, 16)
        self.blocks = nn.Sequential(Att(**kw), Att(**kw))
        self.head = nn.Linear(16, 64)

    def forward(self, tokens):
        return self.head(self.blocks(self.emb(tokens)))


tokens, labels = tiny_gpt.batch()
out = Path(sys.argv[1])
for name, kw in [("scale", dict(scale=1e-5)),
                 ("causal", dict(causal=True, scale=0.3)),
                 ("mask", dict(masked=True))]:
    torch.manual_seed(0)
    for line in step0.check(LM(**kw), {"tokens": tokens}, labels, out, name):
        print(line)
# CHECK:      scale: loss rp {{[0-9.]+}} torch {{[0-9.]+}}: within 0.0001: True
# CHECK-NEXT: scale: gradients: 7 of 7, within 0.0001: True
# CHECK:      causal: loss rp {{[0-9.]+}} torch {{[0-9.]+}}: within 0.0001: True
# CHECK-NEXT: causal: gradients: 7 of 7, within 0.0001: True
# CHECK:      mask: loss rp {{[0-9.]+}} torch {{[0-9.]+}}: within 0.0001: True
# CHECK-NEXT: mask: gradients: 7 of 7, within 0.0001: True


# PyTorch's is_causal over more keys than queries is aligned top-left,
# rp.attention's causal bottom-right: refused, naming attn_mask.
class TopLeft(nn.Module):
    def forward(self, x):
        return F.scaled_dot_product_attention(x[:, :, :2], x, x,
                                              is_causal=True)


import rp  # noqa: E402
try:
    rp.trace(TopLeft(), (torch.randn(1, 2, 4, 8),), out / "top-left")
except Exception as exc:  # noqa: BLE001
    print(f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
# CHECK: TraceError: rp.trace: unsupported op {{.*}} (is_causal with 2 queries and 4 keys) in {{.*}}; PyTorch's causal mask is aligned top-left, rp's bottom-right: pass the mask as attn_mask

# IR: rp.layer "blocks.0"
# IR: rp.attention {{.*}} causal scale = 3.000000e-01
