# RUN: rm -rf %t && mkdir -p %t
# RUN: %PYTHON %s %t | FileCheck %s
# RUN: FileCheck %s --check-prefix=IR < %t/cnn/model.mlir

# rp.trace -> rp.compile -> rp.train on one device: the step-0 loss and
# every parameter's gradient equal PyTorch autograd's within 1e-4 for
# convolutions rp maps as im2col (strided slices of the zero-padded input,
# one per kernel offset, and an rp.matmul per group) and for ATen's
# addmm / baddbmm with beta and alpha other than 1:
# - cnn: Conv2d with stride 2 and padding 1; blocks with groups 2 and
#   padding 'same', groups 4 and dilation 2; a 2x3 kernel with stride
#   (1, 2) and no padding or bias;
# - conv1d: a depthwise Conv1d (groups = channels) over token embeddings;
# - scaled: torch.addmm(beta=0.5 and 0, alpha=2) and torch.baddbmm(beta=0.25,
#   alpha=0.125) with trainable inputs.

import os
import sys
from pathlib import Path

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import step0  # noqa: E402
import tiny_gpt  # noqa: E402


class ConvBlock(nn.Module):
    def __init__(self, c, groups, dilation, padding):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=padding, dilation=dilation,
                              groups=groups)

    def forward(self, x):
        return x + torch.relu(self.conv(x))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.blocks = nn.Sequential(ConvBlock(8, 2, 1, "same"),
                                    ConvBlock(8, 4, 2, 2))
        self.reduce = nn.Conv2d(8, 8, (2, 3), stride=(1, 2), bias=False)
        self.head = nn.Linear(8, 5)

    def forward(self, images):
        x = self.reduce(self.blocks(self.stem(images)))  # [B, 8, 5, 2]
        return self.head(x.mean(dim=(2, 3)))


class Conv1dBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.conv = nn.Conv1d(d, d, 3, padding=1, groups=d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):  # [B, S, D]
        y = self.conv(x.transpose(1, 2)).transpose(1, 2)
        return x + self.proj(torch.tanh(y))


class Conv1dLM(nn.Module):
    def __init__(self, vocab=64, d=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.Sequential(Conv1dBlock(d), Conv1dBlock(d))
        self.head = nn.Linear(d, vocab)

    def forward(self, tokens):
        return self.head(self.blocks(self.emb(tokens)))


class ScaledBlock(nn.Module):
    def __init__(self, d, s, beta):
        super().__init__()
        self.beta = beta
        self.weight = nn.Parameter(torch.randn(d, d) / d ** 0.5)
        self.bias = nn.Parameter(torch.randn(d))
        self.scores = nn.Parameter(torch.randn(1, s, s))

    def forward(self, x):
        b, s, d = x.shape
        y = torch.addmm(self.bias, x.reshape(b * s, d), self.weight,
                        beta=self.beta, alpha=2.0).reshape(b, s, d)
        if self.beta == 0:  # addmm ignores the bias; it still trains here
            y = y + self.bias
        att = torch.baddbmm(self.scores.expand(b, s, s), y, x.transpose(1, 2),
                            beta=0.25, alpha=0.125)
        return x + torch.softmax(att, dim=-1) @ y


class ScaledLM(nn.Module):
    def __init__(self, vocab=64, d=16, s=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.Sequential(ScaledBlock(d, s, 0.5),
                                    ScaledBlock(d, s, 0.0))
        self.head = nn.Linear(d, vocab)

    def forward(self, tokens):
        return self.head(self.blocks(self.emb(tokens)))


out = Path(sys.argv[1])
g = torch.Generator().manual_seed(0)
images = torch.randn(4, 3, 12, 12, generator=g)
classes = torch.randint(0, 5, (4,), generator=g)
tokens, labels = tiny_gpt.batch()

torch.manual_seed(0)
for line in step0.check(CNN(), {"images": images}, classes, out, "cnn"):
    print(line)
# CHECK:      cnn: compiled training plan, 1 device, round-robin schedule, 1 microbatch per step; 4 layers
# CHECK-NEXT: cnn: loss rp {{[0-9.]+}} torch {{[0-9.]+}}: within 0.0001: True
# CHECK-NEXT: cnn: gradients: 9 of 9, within 0.0001: True

torch.manual_seed(0)
for line in step0.check(Conv1dLM(), {"tokens": tokens}, labels, out,
                        "conv1d"):
    print(line)
# CHECK-NEXT: conv1d: compiled training plan, 1 device, round-robin schedule, 1 microbatch per step; 4 layers
# CHECK-NEXT: conv1d: loss rp {{[0-9.]+}} torch {{[0-9.]+}}: within 0.0001: True
# CHECK-NEXT: conv1d: gradients: 11 of 11, within 0.0001: True

torch.manual_seed(0)
for line in step0.check(ScaledLM(), {"tokens": tokens}, labels, out,
                        "scaled"):
    print(line)
# CHECK-NEXT: scaled: compiled training plan, 1 device, round-robin schedule, 1 microbatch per step; 4 layers
# CHECK-NEXT: scaled: loss rp {{[0-9.]+}} torch {{[0-9.]+}}: within 0.0001: True
# CHECK-NEXT: scaled: gradients: 9 of 9, within 0.0001: True

# The stem: padding 1 as zero blocks on both sides of each spatial dim,
# then the 9 kernel offsets as stride-2 slices of the padded image.
# IR: func.func @main(%arg0: tensor<4x3x12x12xf32> {rp.name = "images"}) -> (tensor<4x5xf32> {rp.name = "output"})
# IR: rp.layer "prefix"
# IR: rp.concat {{.*}} dim = 2 : (tensor<4x3x1x12xf32>, tensor<4x3x12x12xf32>, tensor<4x3x1x12xf32>) -> tensor<4x3x14x12xf32>
# IR: rp.concat {{.*}} dim = 3 : (tensor<4x3x14x1xf32>, tensor<4x3x14x12xf32>, tensor<4x3x14x1xf32>) -> tensor<4x3x14x14xf32>
# IR: rp.slice {{.*}} offsets = [0, 0, 0, 0] strides = [1, 1, 2, 2] : tensor<4x3x14x14xf32> -> tensor<4x3x6x6xf32>
# IR: rp.slice {{.*}} offsets = [0, 0, 2, 2] strides = [1, 1, 2, 2] : tensor<4x3x14x14xf32> -> tensor<4x3x6x6xf32>
# IR: rp.matmul {{.*}} transpose_b : (tensor<4x36x27xf32>, tensor<8x27xf32>) -> tensor<4x36x8xf32>
# Groups 2: one matmul batched over the groups.
# IR: rp.layer "blocks.0"
# IR: rp.matmul {{.*}} transpose_b : (tensor<4x2x36x36xf32>, tensor<2x4x36xf32>) -> tensor<4x2x36x4xf32>
# Dilation 2 with padding 2: the last offset starts at 4.
# IR: rp.layer "blocks.1"
# IR: rp.slice {{.*}} offsets = [0, 0, 4, 4] strides = [1, 1, 1, 1] : tensor<4x8x10x10xf32> -> tensor<4x8x6x6xf32>
# IR: rp.matmul {{.*}} transpose_b : (tensor<4x4x36x18xf32>, tensor<4x2x18xf32>) -> tensor<4x4x36x2xf32>
# IR: rp.layer "suffix"
# IR: rp.matmul {{.*}} transpose_b : (tensor<4x10x48xf32>, tensor<8x48xf32>) -> tensor<4x10x8xf32>
# IR: return
