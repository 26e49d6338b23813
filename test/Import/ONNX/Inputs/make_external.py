"""Writes models whose weight lives in an external data file, at a location
the test chooses: the cases onnxruntime refuses (a location that leaves the
model's folder, an absolute path, a link out, ".") and one it accepts.

Usage: make_external.py OUT_DIR

OUT_DIR gets model/ (the models, and w.bin, a good data file), outside/w.bin
(a data file beside the model's folder) and model/link.bin, a symbolic link
to outside/w.bin. Each model computes Y = X @ W with W [4, 4] f32 external.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper


def model(location):
    w = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[4, 4])
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"),
                       ("length", "64")):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["X", "W"], ["Y"], name="mm")], "ext",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 4])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def main(out):
    folder, outside = os.path.join(out, "model"), os.path.join(out, "outside")
    os.makedirs(folder)
    os.makedirs(outside)
    data = np.arange(16, dtype=np.float32).tobytes()
    for path in (os.path.join(folder, "w.bin"), os.path.join(outside, "w.bin")):
        with open(path, "wb") as f:
            f.write(data)
    os.symlink(os.path.abspath(os.path.join(outside, "w.bin")),
               os.path.join(folder, "link.bin"))
    cases = {
        "good": "w.bin",
        "dotdot": "../outside/w.bin",
        "absolute": os.path.join(os.path.abspath(outside), "w.bin"),
        "link": "link.bin",
        "dot": ".",
        "inner-dotdot": "sub/../w.bin",
    }
    for name, location in cases.items():
        onnx.save(model(location), os.path.join(folder, name + ".onnx"))


if __name__ == "__main__":
    main(sys.argv[1])
