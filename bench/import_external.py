"""Import time of a model with 1 GiB of external weights, side by side with
onnx.load of the same model (the baseline every ONNX tool pays).

Usage: .venv/bin/python bench/import_external.py [--gib 1.0] [--keep DIR]

Builds a chain of MatMuls whose weights (f32, 1024 x 4096 and back) live in
one external data file, then times `rp-import` (which references the data in
place and writes only the IR) and `onnx.load(load_external_data=True)`.
Prints the times, their ratio and the IR size. Needs about 1 GiB of free disk
per GiB of weights.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

ROOT = Path(__file__).resolve().parents[1]


def build(dir_, gib):
    width, hidden = 1024, 4096
    per = width * hidden * 4
    count = max(2, int(round(gib * (1 << 30) / per)) // 2 * 2)
    data_name = "weights.data"
    inits, nodes = [], []
    chunk = np.full((width, hidden), 1e-3, np.float32).tobytes()
    with open(dir_ / data_name, "wb") as f:
        for i in range(count):
            shape = [width, hidden] if i % 2 == 0 else [hidden, width]
            t = TensorProto(name=f"layers.{i}.weight", data_type=TensorProto.FLOAT,
                            dims=shape)
            t.data_location = TensorProto.EXTERNAL
            for k, v in (("location", data_name), ("offset", str(i * per)),
                         ("length", str(per))):
                e = t.external_data.add()
                e.key, e.value = k, v
            f.write(chunk)
            inits.append(t)
            src = "x" if i == 0 else f"h{i - 1}"
            nodes.append(helper.make_node("MatMul", [src, t.name], [f"h{i}"],
                                          name=f"/layers.{i}/MatMul"))
    graph = helper.make_graph(
        nodes, "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, width])],
        [helper.make_tensor_value_info(f"h{count - 1}", TensorProto.FLOAT,
                                       [8, width])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, dir_ / "model.onnx")
    return count, count * per


def best_of(n, fn):
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--keep", type=Path)
    ap.add_argument("--inline", action="store_true",
                    help="store the weights inside the .onnx (under 2 GiB): "
                         "rp-import then copies them to its weights file")
    args = ap.parse_args()
    rp_import = Path(os.environ.get("RP_BIN", ROOT / "build" / "bin")) / "rp-import"
    work = Path(tempfile.mkdtemp(prefix="rp-bench-"))
    try:
        count, nbytes = build(work, args.gib)
        if args.inline:
            model = onnx.load(str(work / "model.onnx"), load_external_data=True)
            onnx.save(model, str(work / "model.onnx"))
            (work / "weights.data").unlink()
            del model
        out = work / "model.mlir"
        rp = best_of(3, lambda: subprocess.run(
            [str(rp_import), str(work / "model.onnx"), "-o", str(out)],
            check=True))
        base = best_of(3, lambda: onnx.load(str(work / "model.onnx"),
                                            load_external_data=True))
        where = "inline" if args.inline else "external"
        print(f"import_external: {nbytes / (1 << 30):.2f} GiB in {count} "
              f"{where} tensors")
        print(f"  rp-import           {rp:8.3f} s   (IR {out.stat().st_size / 1024:.1f} KiB)")
        print(f"  onnx.load (baseline){base:8.3f} s")
        print(f"  ratio rp/baseline   {rp / base:8.3f}")
        if args.keep:
            shutil.copytree(work, args.keep, dirs_exist_ok=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
