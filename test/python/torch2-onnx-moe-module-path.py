# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: %TORCH2_PYTHON %s %t %S/../Import/ONNX/error-moe-region-unchecked.onnxtext | FileCheck %s

# rp-import's refusal of a mixture-of-experts block names the module the
# node comes from when the export records it: torch's dynamo exporter
# names its nodes `node_topk__1` and keeps the module path in the node's
# `pkg.torch.onnx.name_scopes` metadata (JetMoE's refusal on dynamo said
# only `TopK node 'node_topk__1'`). The onnx rp-import builds against
# predates NodeProto.metadata_props, so it reads them from the unknown
# fields (lib/Import/ONNX/MoEGraphIndex.h, modulePath). A graph with a
# softmax router whose TopK takes the smallest scores, with and without
# the metadata: the module appears only where recorded. The same for a
# region node the whole-block matcher refuses (MoERegionCheck.cpp: the
# near miss of error-moe-region-unchecked.onnxtext, whose routing weights
# are scaled again).

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnx.parser
from onnx import TensorProto, helper, numpy_helper

import rp

out = Path(sys.argv[1])


def model(scopes):
    topk = helper.make_node("TopK", ["p", "k"], ["v", "i"],
                            name="node_topk__1", largest=0)
    if scopes:
        entry = topk.metadata_props.add()
        entry.key = "pkg.torch.onnx.name_scopes"
        entry.value = repr(scopes)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["l"]),
         helper.make_node("Softmax", ["l"], ["p"], axis=-1), topk,
         # (The experts' one-hot mask: a TopK whose choices no expert
         # reads is imported op by op.)
         helper.make_node("OneHot", ["i", "depth", "onoff"], ["mask"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("v", TensorProto.FLOAT, [4, 2])],
        [numpy_helper.from_array(np.ones((8, 4), np.float32), "w"),
         numpy_helper.from_array(np.array([2], np.int64), "k"),
         numpy_helper.from_array(np.array(4, np.int64), "depth"),
         numpy_helper.from_array(np.array([0, 1], np.int64), "onoff")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


for tag, scopes in (("dynamo", ["", "lm", "lm.layers.0.moe.router", "topk"]),
                    ("plain", None)):
    path = out / f"{tag}.onnx"
    onnx.save(model(scopes), str(path))
    r = subprocess.run([str(rp.find_tool("rp-import")), str(path), "-o",
                        str(out / f"{tag}.mlir")], capture_output=True,
                       text=True)
    line = r.stderr[r.stderr.find("error: "):].splitlines()[0]
    print(f"{tag}: {r.returncode} {line}")
# CHECK: dynamo: 1 error: TopK node 'node_topk__1' (module 'lm.layers.0.moe.router'): a mixture-of-experts block (TopK routing) rp-import cannot map: it takes the smallest scores
# CHECK: plain: 1 error: TopK node 'node_topk__1': a mixture-of-experts block (TopK routing) rp-import cannot map: it takes the smallest scores


# The region node's refusal names its module too.
text = Path(sys.argv[2]).read_text()
near = onnx.parser.parse_model(text[text.index("<ir_version"):])
scale = next(n for n in near.graph.node if list(n.output) == ["wn"])
scale.name = "node_mul_7"
entry = scale.metadata_props.add()
entry.key = "pkg.torch.onnx.name_scopes"
entry.value = repr(["", "lm", "lm.layers.0.moe", "mul"])
onnx.save(near, str(out / "region.onnx"))
r = subprocess.run([str(rp.find_tool("rp-import")), str(out / "region.onnx"),
                    "-o", str(out / "region.mlir")], capture_output=True,
                   text=True)
line = r.stderr[r.stderr.find("error: "):].splitlines()[0]
print(f"region: {r.returncode} {line}")
# CHECK: region: 1 error: Mul node 'node_mul_7' (module 'lm.layers.0.moe'): a mixture-of-experts block (TopK routing) rp-import cannot map: it computes Mul of the routing weights and 'scale' from outside the block (not an expert's output), which the rp.moe ops replacing the block would not reproduce
