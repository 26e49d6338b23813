# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: %TORCH2_PYTHON %s %t | FileCheck %s

# ONNX Conv, Pad and GatherND on run-time values (lib/Import/ONNX/
# ConvHandlers.cpp), through the TorchScript exporter (opset 17) and the
# dynamo exporter (opset 18), in a small LM where each is on the
# gradient's path: a depthwise causal 1-D convolution (Mamba's and LFM's
# short convolution: padding K-1, one group per channel, the tail cut
# off), a grouped 2-D convolution with padding, stride and dilation, a
# constant pad with a crop (RWKV's time shift) and a learned table read at
# positions (codegen's and Whisper's table[position_ids], which dynamo
# writes as GatherND). Per path, as bench/families.py checks a family: the
# loss within 1e-4 of PyTorch's, every gradient by its parameter name
# within 1e-4, 2 devices bitwise equal to 1. Before these handlers: `Conv
# node ...: only 2-D convolutions are supported`, and Pad and GatherND were
# `supported on input-independent values only`.

import sys
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent / "Inputs"))
import torch2_lm_check  # noqa: E402


class Mix(nn.Module):
    def __init__(self, d=16, s=32):
        super().__init__()
        self.a = nn.Linear(d, d)
        self.conv = nn.Conv1d(d, d, 4, groups=d, padding=3)
        self.conv2 = nn.Conv2d(2, 4, (3, 2), stride=(1, 2), padding=(2, 1),
                               dilation=(2, 1), groups=2)
        self.table = nn.Parameter(torch.randn(s, d) * 0.1)
        self.out = nn.Linear(d, d)

    def forward(self, x):
        b, s, d = x.shape
        y = x + self.table[torch.arange(s)]
        h = self.a(y)
        c = self.conv(h.transpose(1, 2))[..., :s].transpose(1, 2)
        img = h.reshape(b * s, 2, 2, 4)
        c2 = self.conv2(img)                         # [B*S, 4, 2, 3]
        y = y + c + F.pad(h, (0, 0, 1, -1)) + F.pad(h, (2, -2), value=0.5)
        y = y + c2.reshape(b, s, -1)[..., :d].sum(-1, keepdim=True)
        return x + self.out(torch.tanh(y))


torch2_lm_check.check_both_paths(Mix, sys.argv[1])

# CHECK: torchscript: loss True, grads True (21 of 21 gradients by name within 0.0001 {{.*}}), bitwise True, None
# CHECK: dynamo: loss True, grads True (21 of 21 gradients by name within 0.0001 {{.*}}), bitwise True, None
