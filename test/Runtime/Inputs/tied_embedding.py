"""Writes a small ONNX language model whose embedding is also its head.

Usage: tied_embedding.py OUT.onnx

ids [2, 16] -> Gather(embed [64, 128]) -> MatMul [128, 32] -> x + tanh(x W)
-> MatMul [32, 128] -> MatMul(embed^T) -> logits [2, 16, 64]. The embedding
is read twice (the lookup and the tied head), so its gradient buffer holds
two values a microbatch, and each microbatch writes it again: a buffer that
is not one interval of time in the runtime's packing.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

E, D, V, S = 128, 32, 64, 16
rng = np.random.default_rng(0)


def weight(name, *shape):
    values = (rng.standard_normal(shape) * 0.1).astype(np.float32)
    return numpy_helper.from_array(values, name)


inits = [weight("embed.weight", V, E), weight("proj.weight", E, D),
         weight("block.weight", D, D), weight("unproj.weight", D, E)]
node = helper.make_node
nodes = [node("Gather", ["embed.weight", "input_ids"], ["e"]),
         node("MatMul", ["e", "proj.weight"], ["h0"]),
         node("MatMul", ["h0", "block.weight"], ["m"]),
         node("Tanh", ["m"], ["t"]),
         node("Add", ["h0", "t"], ["h1"]),
         node("MatMul", ["h1", "unproj.weight"], ["u"]),
         node("Transpose", ["embed.weight"], ["et"], perm=[1, 0]),
         node("MatMul", ["u", "et"], ["logits"])]
graph = helper.make_graph(
    nodes, "tied", [helper.make_tensor_value_info("input_ids",
                                                  TensorProto.INT64, [2, S])],
    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [2, S, V])],
    inits)
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
          sys.argv[1])
