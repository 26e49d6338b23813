# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t | FileCheck %s

# DBRX (transformers 5.24's DbrxForCausalLM, bench/families.py's shrunk
# config: 2 layers, hidden 32, 4 experts, 2 per token) through rp.trace
# and the TorchScript exporter. Its experts are three flat [E x F, H]
# parameters (w1, v1, w2) viewed as [E, F, H] and indexed in the eager
# loop, the gate and up separate, the down matmul untransposed, the output
# rows viewed as [-1, H] before the weighting, and the router normalises
# the chosen softmax scores by their L1 norm: rp-import refused the block
# ("the graph holds 0 experts of the 5"); it now maps it whole
# (lib/Import/ONNX/MoESplitStacks.cpp). Checked on each path: the loss
# within 1e-4 of PyTorch's, every gradient by its parameter name within
# 1e-4, and 4 devices bitwise equal to 1 (loss and every gradient); the
# imported graph holds the rp.moe ops. Near miss: the same model
# normalising by the L2 norm (moe_normalize_expert_weights = 2) is refused
# naming the ReduceL2 node (with its module path) and what to do, not
# imported as the sum.

import subprocess
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "Inputs"))
import family_paths_check  # noqa: E402
from family_paths_check import families, rp  # noqa: E402

out = Path(sys.argv[1])
model = families.build("dbrx")
tokens = family_paths_check.check_paths(model, out)
# CHECK: trace: loss True, 19 of 19 gradients within 1e-4, 4 devices bitwise True
# CHECK: torchscript: loss True, 19 of 19 gradients within 1e-4, 4 devices bitwise True

mlir = out / "torchscript.mlir"
rp.run_tool("rp-import", [str(out / "torchscript.onnx"), "-o", str(mlir)])
text = mlir.read_text()
print("grouped matmuls:", text.count("rp.moe.grouped_matmul"))
# Two layers, three each (gate, up, down).
# CHECK: grouped matmuls: 6

# The near miss: the L2 norm of the chosen scores is not their sum.
config = model.lm.config
config.ffn_config.moe_normalize_expert_weights = 2.0
for block in model.lm.transformer.blocks:
    block.ffn.moe_normalize_expert_weights = 2.0
(out / "l2").mkdir()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    src = families._source("torchscript", model, tokens, out / "l2")
r = subprocess.run([str(rp.find_tool("rp-import")), str(src), "-o",
                    str(out / "l2.mlir")], capture_output=True, text=True)
print("L2:", r.returncode, r.stderr[r.stderr.find("error: "):].splitlines()[0])
# CHECK: L2: 1 error: ReduceL2 node '/lm/transformer/blocks.0/ffn/ReduceL2': a mixture-of-experts block (TopK routing) rp-import cannot map: it normalises the chosen weights by ReduceL2 (rp maps their sum, or the L1 norm of softmax scores: moe_normalize_expert_weights = 1); trace the model with rp.trace
