"""Turns an .onnxtext test file into a binary ONNX model.

Usage: onnxtext.py IN.onnxtext OUT.onnx

Lines starting with '#' (lit RUN and FileCheck lines) are dropped; the rest
is ONNX's textual syntax (onnx.parser). Nodes get names `n<i>_<OpType>` so
that diagnostics and locations can be checked.
"""

import sys

import onnx
import onnx.parser


def main(src, dst):
    text = "\n".join(
        line for line in open(src).read().splitlines()
        if not line.lstrip().startswith("#")
    )
    model = onnx.parser.parse_model(text)
    for i, node in enumerate(model.graph.node):
        if not node.name:
            node.name = f"n{i}_{node.op_type}"
    onnx.save(model, dst)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
