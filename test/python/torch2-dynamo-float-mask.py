# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: %TORCH2_PYTHON %s %t | FileCheck %s

# torch's dynamo exporter cannot export `1.0 - mask` for an int64 mask: its
# type promotion pass re-dispatches the subtraction of a tensor from a
# Python float and finds no aten.sub overload ("Cannot find a compatible
# OpOverload for aten.sub", XLNet's and ProphetNet's attention masks).
# bench/families.py's dynamo export then exports again with the mask as
# float, as these models document it (test/python/Inputs/hf_models.py's
# LogitsOnly.mask_dtype): a small LM that subtracts its all-ones mask from
# 1.5 passes on the dynamo path, 1 and 2 devices. Near miss: a model
# without that switch keeps the exporter's error.

import sys
from pathlib import Path

import torch
import torch.nn as nn

sys.path.insert(0, str(Path(__file__).resolve().parent / "Inputs"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import families  # noqa: E402
from families_export import cause, dynamo_export  # noqa: E402


class MaskedLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(64, 16)
        self.a = nn.Linear(16, 16)
        self.head = nn.Linear(16, 64)
        self.mask_dtype = None

    def forward(self, tokens):
        mask = torch.ones_like(tokens, dtype=self.mask_dtype)
        h = self.emb(tokens) * (1.5 - mask)[..., None]
        return self.head(torch.tanh(self.a(h)))


torch.manual_seed(0)
model = MaskedLM()
tokens = torch.randint(0, 64, (families.M, 16))
labels = torch.randint(0, 64, (families.M, 16))
ref = families.reference(model, tokens, labels)
out = Path(sys.argv[1])
cell = families.check_path("dynamo", model, ref, tokens, labels, out)
print(f"dynamo: loss {cell['loss']}, grads {cell['grads']} "
      f"({cell['detail']}), bitwise {cell['bitwise']}, {cell['reason']}, "
      f"mask back to {model.mask_dtype}")

# CHECK: dynamo: loss True, grads True (5 of 5 gradients by name within 0.0001 {{.*}}), bitwise True, None, mask back to None


class NoSwitch(MaskedLM):
    def __init__(self):
        super().__init__()
        del self.mask_dtype

    def forward(self, tokens):
        mask = torch.ones_like(tokens)
        return self.head(self.emb(tokens) * (1.5 - mask)[..., None])


try:
    dynamo_export(NoSwitch(), tokens[:1], out / "plain.onnx")
    print("no switch: exported")
except Exception as e:  # torch.onnx's ConversionError
    print("no switch:", str(cause(e)).splitlines()[0][:70])

# CHECK: no switch: Cannot find a compatible OpOverload for aten.sub
