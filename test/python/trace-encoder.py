# RUN: rm -rf %t && mkdir -p %t
# RUN: %PYTHON %s %t | FileCheck %s
# RUN: FileCheck %s --check-prefix=IR < %t/causal/model.mlir

# rp.trace -> rp.compile -> rp.train on one device for torch.nn's
# TransformerEncoder (batch_first, dropout 0, traced in training mode)
# between an embedding and a linear head over a 64-token vocabulary: the
# step-0 loss (cross-entropy, mean over the non-ignored labels) and every
# parameter's gradient equal PyTorch autograd's within 1e-4. Three forms:
# post-norm; pre-norm with the encoder's final LayerNorm; post-norm with a
# causal float mask (MultiheadAttention adds it with aten.baddbmm). Each
# model exported to ONNX trains 3 sync steps to the traced path's losses
# within 1e-5.

import os
import sys
from pathlib import Path

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import step0  # noqa: E402
import tiny_gpt  # noqa: E402


class Encoder(nn.Module):
    def __init__(self, norm_first, causal, vocab=64, d=32, heads=4,
                 layers=2, ff=64):
        super().__init__()
        self.causal = causal
        self.emb = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0,
                                           batch_first=True,
                                           norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(
            layer, layers, norm=nn.LayerNorm(d) if norm_first else None,
            enable_nested_tensor=False)
        self.head = nn.Linear(d, vocab)

    def forward(self, tokens):
        mask = None
        if self.causal:
            s = tokens.shape[1]
            mask = torch.triu(torch.full((s, s), float("-inf")), diagonal=1)
        return self.head(self.encoder(self.emb(tokens), mask=mask))


out = Path(sys.argv[1])
tokens, labels = tiny_gpt.batch()
for name, norm_first, causal in [("post-norm", False, False),
                                 ("pre-norm", True, False),
                                 ("causal", False, True)]:
    torch.manual_seed(0)
    model = tiny_gpt.make_distinct(Encoder(norm_first, causal))
    for line in step0.check(model, {"tokens": tokens}, labels, out, name,
                            onnx_steps=3):
        print(line)

# CHECK:      post-norm: compiled training plan, 1 device, round-robin schedule, 1 microbatch per step; 4 layers
# CHECK-NEXT: post-norm: loss rp {{[0-9.]+}} torch {{[0-9.]+}}: within 0.0001: True
# CHECK-NEXT: post-norm: gradients: 27 of 27, within 0.0001: True
# CHECK-NEXT: post-norm: traced vs onnx: 3 of 3 steps, within 1e-05: True
# CHECK-NEXT: pre-norm: compiled training plan, 1 device, round-robin schedule, 1 microbatch per step; 4 layers
# CHECK-NEXT: pre-norm: loss rp {{[0-9.]+}} torch {{[0-9.]+}}: within 0.0001: True
# CHECK-NEXT: pre-norm: gradients: 29 of 29, within 0.0001: True
# CHECK-NEXT: pre-norm: traced vs onnx: 3 of 3 steps, within 1e-05: True
# CHECK-NEXT: causal: compiled training plan, 1 device, round-robin schedule, 1 microbatch per step; 4 layers
# CHECK-NEXT: causal: loss rp {{[0-9.]+}} torch {{[0-9.]+}}: within 0.0001: True
# CHECK-NEXT: causal: gradients: 27 of 27, within 0.0001: True
# CHECK-NEXT: causal: traced vs onnx: 3 of 3 steps, within 1e-05: True

# IR: func.func @main(%arg0: tensor<2x16xi64> {rp.name = "tokens"}) -> (tensor<2x16x64xf32> {rp.name = "output"})
# IR: rp.layer "prefix"
# IR: rp.gather
# IR: rp.layer "encoder.layers.0"
# IR: rp.attention {{.*}} causal
# IR: rp.layer_norm
# IR: rp.layer "encoder.layers.1"
# IR: rp.layer "suffix"
# IR: return
