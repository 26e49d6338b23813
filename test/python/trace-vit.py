# RUN: rm -rf %t && mkdir -p %t
# RUN: %PYTHON %s %t | FileCheck %s
# RUN: FileCheck %s --check-prefix=IR < %t/vit/model.mlir

# rp.trace -> rp.compile -> rp.train on one device for torchvision's
# VisionTransformer in a small configuration (32x32 images, 8x8 patches, 2
# layers, 2 heads, width 32, 10 classes, dropout 0): the step-0 loss
# (cross-entropy over one class id per image) and every parameter's
# gradient equal PyTorch autograd's within 1e-4. conv_proj, a convolution
# whose stride is its kernel size, becomes patches (reshape, transpose) and
# an rp.matmul; a second model checks uneven patches (kernel 4x3 over a
# 10x11 image: the rows and columns no patch covers are sliced off). The
# ViT exported to ONNX trains 3 sync steps to the traced path's losses
# within 1e-5.

import os
import sys
from pathlib import Path

import torch
import torch.nn as nn
from torchvision.models.vision_transformer import VisionTransformer

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import step0  # noqa: E402
import tiny_gpt  # noqa: E402

out = Path(sys.argv[1])
g = torch.Generator().manual_seed(0)
images = torch.randn(4, 3, 32, 32, generator=g)
classes = torch.randint(0, 10, (4,), generator=g)

torch.manual_seed(0)
vit = tiny_gpt.make_distinct(VisionTransformer(
    image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32,
    mlp_dim=64, num_classes=10, dropout=0.0, attention_dropout=0.0))
for line in step0.check(vit, {"x": images}, classes, out, "vit",
                        onnx_steps=3):
    print(line)
# CHECK:      vit: compiled training plan, 1 device, round-robin schedule, 1 microbatch per step; 4 layers
# CHECK-NEXT: vit: loss rp {{[0-9.]+}} torch {{[0-9.]+}}: within 0.0001: True
# CHECK-NEXT: vit: gradients: 32 of 32, within 0.0001: True
# CHECK-NEXT: vit: traced vs onnx: 3 of 3 steps, within 1e-05: True


class Patches(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Conv2d(3, 8, kernel_size=(4, 3), stride=(4, 3))
        self.blocks = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8))
        self.head = nn.Linear(8 * 2 * 3, 5)

    def forward(self, x):
        p = self.embed(x).flatten(2).transpose(1, 2)  # [B, 6, 8]
        return self.head(self.blocks(p).flatten(1))


torch.manual_seed(0)
patches = Patches()
for line in step0.check(patches, {"x": torch.randn(4, 3, 10, 11, generator=g)},
                        torch.randint(0, 5, (4,), generator=g), out,
                        "uneven"):
    print(line)
# CHECK-NEXT: uneven: compiled training plan, 1 device, round-robin schedule, 1 microbatch per step; 4 layers
# CHECK-NEXT: uneven: loss rp {{[0-9.]+}} torch {{[0-9.]+}}: within 0.0001: True
# CHECK-NEXT: uneven: gradients: 8 of 8, within 0.0001: True

# IR: func.func @main(%arg0: tensor<4x3x32x32xf32> {rp.name = "x"}) -> (tensor<4x10xf32> {rp.name = "output"})
# IR: rp.param "conv_proj.weight" trainable at "weights.safetensors"[{{[0-9]+}}] : tensor<32x3x8x8xf32>
# IR: rp.layer "prefix"
# IR: rp.reshape {{.*}} : tensor<4x3x32x32xf32> to tensor<4x3x4x8x4x8xf32>
# IR: rp.transpose {{.*}} permutation = [0, 2, 4, 1, 3, 5]
# IR: rp.matmul {{.*}} transpose_b : (tensor<4x4x4x192xf32>, tensor<32x192xf32>) -> tensor<4x4x4x32xf32>
# IR: rp.layer "encoder.layers.encoder_layer_0"
# IR: rp.attention
# IR: rp.layer "encoder.layers.encoder_layer_1"
# IR: rp.layer "suffix"
# IR: return
