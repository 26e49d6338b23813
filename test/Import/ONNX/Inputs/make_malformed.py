"""Writes ONNX models that break the ONNX spec, which rp-import must refuse
with an error naming the node (never crash or import something wrong).

Usage: make_malformed.py OUT_DIR

onnx.checker rejects these models, and some (a Split without outputs, a
Concat without inputs) cannot be written in onnx.parser's text syntax, so
they are built with onnx.helper. One NAME.onnx per entry of MODELS; nodes
are named n<i>_<OpType> as in the .onnxtext tests.
"""

import os
import sys

import onnx
from onnx import TensorProto, helper


def ints(name, values, dims=None):
    return helper.make_node(
        "Constant", [], [name],
        value=helper.make_tensor(name, TensorProto.INT64,
                                 [len(values)] if dims is None else dims,
                                 values))


def model(nodes, inputs, outputs, named=True):
    for i, node in enumerate(nodes):
        node.name = f"n{i}_{node.op_type}" if named else ""
    graph = helper.make_graph(
        nodes, "malformed",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


F, I = TensorProto.FLOAT, TensorProto.INT64

MODELS = {
    # Concat needs at least one input.
    "concat_no_inputs": model(
        [helper.make_node("Concat", [], ["Y"], axis=0)],
        [("X", F, [2])], [("Y", F, [2])]),
    # Split needs at least one output.
    "split_no_outputs": model(
        [helper.make_node("Split", ["X"], []),
         helper.make_node("Relu", ["X"], ["Y"])],
        [("X", F, [2])], [("Y", F, [2])]),
    # The same without node names: the error names the node by op type and
    # index, as it has no output to go by.
    "split_no_outputs_noname": model(
        [helper.make_node("Relu", ["X"], ["Y"]),
         helper.make_node("Split", ["X"], [])],
        [("X", F, [2])], [("Y", F, [2])], named=False),
    # MatMul of a scalar.
    "matmul_scalar": model(
        [helper.make_node("MatMul", ["X", "V"], ["Y"])],
        [("X", F, []), ("V", F, [3])], [("Y", F, [3])]),
    # Slice: 2 starts, 1 end, 2 axes, 1 step.
    "slice_lengths": model(
        [ints("s", [0, 0]), ints("e", [2]), ints("a", [0, 1]), ints("t", [1]),
         helper.make_node("Slice", ["X", "s", "e", "a", "t"], ["Y"])],
        [("X", F, [4, 10])], [("Y", F, [2, 10])]),
    # Transpose with a perm shorter than the rank.
    "transpose_perm": model(
        [helper.make_node("Transpose", ["X"], ["Y"], perm=[1, 0])],
        [("X", F, [2, 3, 4])], [("Y", F, [3, 2])]),
    # ConstantOfShape with a negative dimension.
    "constantofshape_negative": model(
        [ints("s", [-1, 4]),
         helper.make_node("ConstantOfShape", ["s"], ["Y"])],
        [("X", F, [2])], [("Y", F, [2, 4])]),
    # Range with a vector start.
    "range_vector": model(
        [ints("a", [0, 1]), ints("b", [3], []),
         helper.make_node("Range", ["a", "b", "b"], ["Y"])],
        [("X", F, [2])], [("Y", I, [1])]),
    # Trilu with an empty k.
    "trilu_k_empty": model(
        [ints("s", [3, 3]), helper.make_node("ConstantOfShape", ["s"], ["o"]),
         ints("k", []), helper.make_node("Trilu", ["o", "k"], ["Y"])],
        [("X", F, [2])], [("Y", F, [3, 3])]),
    # Reciprocal of integers.
    "reciprocal_int": model(
        [helper.make_node("Reciprocal", ["X"], ["Y"])],
        [("X", I, [3])], [("Y", I, [3])]),
    # Add of a float and an integer tensor.
    "add_mixed_types": model(
        [helper.make_node("Add", ["X", "V"], ["Y"])],
        [("X", F, [3]), ("V", I, [3])], [("Y", F, [3])]),
}


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    for name, m in MODELS.items():
        onnx.save(m, os.path.join(out_dir, name + ".onnx"))


if __name__ == "__main__":
    main(sys.argv[1])
