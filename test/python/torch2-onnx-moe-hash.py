# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: %TORCH2_PYTHON %s %t | FileCheck %s

# DeepSeek-V4's hash-routed MoE layers through the TorchScript exporter:
# each token's k experts are a frozen table gathered at its token id
# (`tid2eid[input_ids]`), then transformers 5's eager experts loop, which
# the exporter unrolls over the experts the example reached, starting from
# OneHot(chosen experts). No TopK or ArgMax picks them, and rp-import found
# the loop only from one of those; it now also starts from the OneHot of
# any chosen experts computed at run time, with k read from the table's
# second axis (lib/Import/ONNX/MoERecognize.cpp, MoERoutedLoop.cpp), and
# maps the loop to the rp.moe ops over every expert, so any token routes
# right, not only the example's. Checked: transformers' own
# DeepseekV4SparseMoeBlock (hash layer, random table over 4 experts, 2 per
# token) trains on 1 and 2 devices with every gradient right, and the
# imported graph holds rp.moe ops. Near miss: the two experts gathered from
# two [V] tables and stacked (k not read from one [V, k] table) keep
# rp-import's OneHot error.

import subprocess
import sys
import warnings
from pathlib import Path

import torch
import torch.nn as nn
import transformers as T
from transformers.models.deepseek_v4 import modeling_deepseek_v4 as dv4

sys.path.insert(0, str(Path(__file__).resolve().parent / "Inputs"))
import torch2_lm_check  # noqa: E402

import rp  # noqa: E402

CONFIG = T.DeepseekV4Config(
    hidden_size=16, intermediate_size=8, num_local_experts=4,
    num_experts_per_tok=2, vocab_size=64, num_hidden_layers=1,
    mlp_layer_types=["hash_moe"])


class Hash(nn.Module):
    def __init__(self):
        super().__init__()
        self.moe = dv4.DeepseekV4SparseMoeBlock(CONFIG, 0)
        for p in self.moe.parameters():
            nn.init.normal_(p, std=0.3)
        # Each token's two experts, distinct (torch.randperm per row).
        table = torch.stack([torch.randperm(4)[:2] for _ in range(64)])
        self.moe.gate.tid2eid.copy_(table)

    def forward(self, x, tokens):
        return x + self.moe(x, tokens)


class Columns(nn.Module):
    """Each of the two experts from a table of its own, [V] each."""

    def __init__(self):
        super().__init__()
        self.experts = dv4.DeepseekV4Experts(CONFIG)
        nn.init.normal_(self.experts.gate_up_proj, std=0.3)
        nn.init.normal_(self.experts.down_proj, std=0.3)
        self.register_buffer("first", torch.arange(64) % 4)
        self.register_buffer("second", (torch.arange(64) + 1) % 4)

    def forward(self, x, tokens):
        flat = x.reshape(-1, 16)
        t = tokens.reshape(-1)
        ids = torch.stack([self.first[t], self.second[t]], -1)
        weights = torch.full(ids.shape, 0.5)
        return self.experts(flat, ids, weights)


out = Path(sys.argv[1])
torch2_lm_check.check_both_paths(Hash, out, tokens_to_layers=True,
                                 paths=("torchscript",))
# CHECK: torchscript: loss True, grads True (15 of 15 gradients by name within 0.0001 {{.*}}), bitwise True, None

mlir = (out / "torchscript" / "torchscript.mlir")
rp.run_tool("rp-import", [str(out / "torchscript" / "torchscript.onnx"),
                          "-o", str(mlir)])
text = mlir.read_text()
print("moe ops:", "rp.moe" in text)
# CHECK: moe ops: True

tokens = torch.randint(0, 64, (1, 16))
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    torch.onnx.export(Columns(), (torch.randn(1, 16, 16), tokens),
                      str(out / "arith.onnx"), opset_version=17,
                      dynamo=False)
r = subprocess.run([str(rp.find_tool("rp-import")), str(out / "arith.onnx"),
                    "-o", str(out / "arith.mlir")], capture_output=True,
                   text=True)
last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
print("near miss:", r.returncode, last[last.find("error: "):][:120])
# CHECK: near miss: 1 error: OneHot node '/experts/OneHot' (opset 17): operator OneHot is supported on input-independent values only
