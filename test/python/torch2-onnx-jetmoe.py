# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t | FileCheck %s

# JetMoE (transformers 5.24's JetMoeForCausalLM, bench/families.py's
# shrunk config) through both ONNX exporters. Its mixtures of MLP experts
# and of attention heads split the tokens by a `.tolist()` of the routing
# and recombine them with `index_add`: the TorchScript exporter stops at
# the index_add (repeated indices) and torch.export bakes the example's
# routing in. Exported within rp.onnx_forms.exportable(model) (rp.trace's
# form: every expert's projection picked by a comparison of the row's
# expert with every class), both exports hold the router's TopK followed
# by ordinary ops; rp-import imports a softmax router's TopK whose choices
# reach no expert op by op (it refused it before, "no OneHot with a
# constant depth"). Checked on each path as bench/families.py checks it:
# the loss within 1e-4 of PyTorch's, every gradient by its parameter name
# within 1e-4 (the tied embedding under either of its names: dynamo keeps
# lm_head's), 4 devices bitwise equal to 1. Then the patch is undone: the
# model's own forward runs again.

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "Inputs"))
import family_paths_check  # noqa: E402
from family_paths_check import families  # noqa: E402

out = Path(sys.argv[1])
model = families.build("jetmoe")
family_paths_check.check_paths(model, out, ("torchscript", "dynamo"))
# CHECK: torchscript: loss True, 24 of 24 gradients within 1e-4, 4 devices bitwise True
# CHECK: dynamo: loss True, 24 of 24 gradients within 1e-4, 4 devices bitwise True

moe = model.lm.model.layers[0].mlp
print("restored:", "forward" not in vars(moe))
# CHECK: restored: True
