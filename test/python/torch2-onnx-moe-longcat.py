# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t | FileCheck %s

# LongCat-Flash (transformers 5.24's LongcatFlashForCausalLM,
# bench/families.py's shrunk config: 4 routed experts and 2 identity
# ("zero") experts, 2 per token) through rp.trace and the TorchScript
# exporter. Its router picks by the softmax scores plus a correction bias
# used only for choosing (the weights are the scores, scaled), and its
# eager experts loop reads each expert's index with `.item()` and branches
# on it: the export holds the routed experts' SwiGLU at constant indices
# and, for an identity expert, its tokens' rows weighted as they are.
# rp-import refused the block ("its scores are not a Softmax of router
# logits"); it now imports the router op by op and maps the loop with its
# identity experts (lib/Import/ONNX/MoERoutedLoop.cpp: part 1 dispatches
# the routed slots over the routed experts' rows of the up stack, part 2
# combines them and adds each token's row times its identity slots'
# weights, as rp.trace does). Checked on each path: the loss within 1e-4
# of PyTorch's, every gradient by its parameter name within 1e-4 (the
# bench's measure), and 4 devices bitwise equal to 1; the imported graph
# holds the rp.moe ops. Near miss: exported from one token, the loop holds
# only the 2 experts that token reached, and rp-import refuses it naming
# the TopK and the longer input that would hold every expert.

import subprocess
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "Inputs"))
import family_paths_check  # noqa: E402
from family_paths_check import families, rp  # noqa: E402

out = Path(sys.argv[1])
model = families.build("longcat_flash")
tokens = family_paths_check.check_paths(model, out)
# CHECK: trace: loss True, 30 of 30 gradients within 1e-4, 4 devices bitwise True
# CHECK: torchscript: loss True, 30 of 30 gradients within 1e-4, 4 devices bitwise True

mlir = out / "torchscript.mlir"
rp.run_tool("rp-import", [str(out / "torchscript.onnx"), "-o", str(mlir)])
text = mlir.read_text()
print("dispatches:", text.count("rp.moe.dispatch"),
      "combines:", text.count("rp.moe.combine"))
# (One MoE layer.)
# CHECK: dispatches: 1 combines: 1

# The near miss: one token reaches 2 of the 6 experts.
(out / "one").mkdir()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    src = families._source("torchscript", model, tokens[:1, :1], out / "one")
r = subprocess.run([str(rp.find_tool("rp-import")), str(src), "-o",
                    str(out / "one.mlir")], capture_output=True, text=True)
print("one token:", r.returncode,
      r.stderr[r.stderr.find("error: "):].splitlines()[0])
# CHECK: one token: 1 error: TopK node '/lm/model/layers.0/mlp/router/TopK': {{.*}}; nor do transformers 5's eager experts map: the graph holds 2 experts of the 6 its eager loop routes to {{.*}}export with a longer input (more tokens) so every expert gets one, or trace the model with rp.trace
