"""Checks rp-import's constant evaluator against ONNX's packaged node tests.

Usage: folded_node_tests.py RP_IMPORT DATA_DIR WORK_DIR

A node test is in scope when every node's op type is one rp-import folds
(rp-import --list-folded-ops) and its opset is one rp imports. Its inputs
become Constant nodes holding the test's own input data, so the whole graph
is input-independent and must fold; the folded values must equal the test's
expected outputs: integers and bools exactly, floats within a few units in
the last place of their type (the reference is numpy, rp computes f32 in
float as onnxruntime does). EXPECTED_FAILURES lists in-scope tests rp
refuses on purpose, with the reason.

Prints one line per unexpected result and a summary line
`folded node tests: N equal, N expected failures, N out of scope, N
unexpected`.
"""

import os
import re
import struct
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnx_node_suite import (expected_failure, failed_import, in_scope,
                             node_tests, read_tensor, run_import, tool_list)

EXPECTED_FAILURES = [
    (r"(uint8|uint16|uint32|uint64|int8|int16|_u?int(8|16)\b)",
     "integer types other than int32/int64"),
    (r"(STRING|string|FLOAT8|float8|INT4|UINT4|int4|e4m3|e5m2)",
     "string, 4-bit and float8 tensors"),
    (r"^test_identity_(opt|sequence)$", "optional and sequence values"),
    (r"^test_castlike_\w*BFLOAT16\w*|^test_cast_BFLOAT16_to_FLOAT$",
     "bfloat16 inputs stored as UINT16, which a Constant cannot hold"),
]

# bf16 values are f32 values with a shorter mantissa.
ELEMENT = {"f32": np.float32, "f16": np.float16, "f64": np.float64,
           "bf16": np.float32, "i64": np.int64, "i32": np.int32, "i1": np.bool_}
ULPS = {np.float32: 4 * 2.0 ** -23, np.float64: 4 * 2.0 ** -52,
        np.float16: 2 * 2.0 ** -10}


def bind_inputs(model, test_dir, out_path):
    """Turns every graph input into a Constant node of the test's data."""
    consts = []
    for i, value in enumerate(model.graph.input):
        tensor = read_tensor(test_dir, "input", i)
        tensor.name = ""
        consts.append(helper.make_node("Constant", [], [value.name],
                                       value=tensor, name="input_" + value.name))
    nodes = consts + list(model.graph.node)
    model.graph.ClearField("input")
    model.graph.ClearField("node")
    model.graph.node.extend(nodes)
    onnx.save(model, out_path)


def parse_constants(text):
    """The values rp printed for the function results, as numpy arrays."""
    consts = {}
    for m in re.finditer(r"(%\w+) = rp\.constant dense<(.*?)> : "
                         r"tensor<([0-9x]*)(\w+)>", text):
        name, body, dims, element = m.groups()
        shape = [int(d) for d in dims.split("x") if d]
        dtype = ELEMENT[element]
        tokens = re.findall(r"0x[0-9A-Fa-f]+|[-+]?(?:\d+\.?\d*|\.\d+)"
                            r"(?:[eE][-+]?\d+)?|true|false", body)
        values = []
        for t in tokens:
            if t.startswith("0x"):  # NaN and infinities print as bits
                bits = int(t, 16) << (16 if element == "bf16" else 0)
                fmt = {np.float32: ("<I", "<f"), np.float64: ("<Q", "<d"),
                       np.float16: ("<H", "<e")}[dtype]
                values.append(struct.unpack(fmt[1], struct.pack(fmt[0], bits))[0])
            elif t in ("true", "false"):
                values.append(t == "true")
            else:
                values.append(float(t) if dtype not in (np.int64, np.int32)
                              else int(t))
        array = np.array(values, dtype=dtype)
        count = int(np.prod(shape)) if shape else 1
        if array.size == 1 and count != 1:
            array = np.full(count, array[0], dtype=dtype)
        consts[name] = array.reshape(shape)
    ret = re.search(r"return ([^:]*):", text)
    if not ret:
        return None
    return [consts.get(v.strip()) for v in ret.group(1).split(",")]


def compare(got, want):
    """None when equal under the rules above, else a message."""
    with np.errstate(invalid="ignore"):  # inf - inf
        return compare_values(got, want)


def compare_values(got, want):
    if got is None:
        return "the result is not a constant"
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    ulp = ULPS.get(want.dtype.type)
    if want.dtype == np.uint16 and got.dtype == np.float32:
        # bfloat16 data: the test stores its bits as uint16.
        want = (want.astype(np.uint32) << 16).view(np.float32)
        ulp = 2 * 2.0 ** -7
    if got.dtype != want.dtype:
        return f"element type {got.dtype}, expected {want.dtype}"
    if want.dtype.kind in "iub":
        bad = np.flatnonzero(got.astype(np.int64) != want.astype(np.int64))
        return None if bad.size == 0 else \
            f"{bad.size} elements differ (first at {bad[0]})"
    g, w = got.astype(np.float64).ravel(), want.astype(np.float64).ravel()
    same_nan = np.isnan(g) == np.isnan(w)
    ok = np.isnan(w) | (g == w) | (np.abs(g - w) <= ulp *
                                   np.maximum(np.abs(w), 1e-30))
    ok &= same_nan
    # Values near 0 (sin(pi)) compare against the largest magnitude.
    scale = np.nanmax(np.abs(w[np.isfinite(w)]), initial=0)
    ok |= np.abs(g - w) <= ulp * scale
    bad = np.flatnonzero(~ok)
    return None if bad.size == 0 else \
        f"{bad.size} elements differ (first at {bad[0]}: {g[bad[0]]!r}, " \
        f"expected {w[bad[0]]!r})"


def main(rp_import, data_dir, work_dir):
    os.makedirs(work_dir, exist_ok=True)
    folded = tool_list(rp_import, "--list-folded-ops")
    equal = expected = out_of_scope = 0
    problems = []
    for name, test_dir, model in node_tests(data_dir):
        if not in_scope(model, folded):
            out_of_scope += 1
            continue
        reason = expected_failure(name, EXPECTED_FAILURES)
        out = os.path.join(work_dir, name + ".onnx")
        bind_inputs(model, test_dir, out)
        proc = run_import(rp_import, [
            out, "-o", "-", "--weights", out + ".weights.bin",
            "--mlir-print-elementsattrs-with-hex-if-larger=-1"])
        if proc.returncode != 0:
            if reason:
                expected += 1
            else:
                problems.append(failed_import(name, proc))
            continue
        results = parse_constants(proc.stdout)
        wants = [numpy_helper.to_array(read_tensor(test_dir, "output", i))
                 for i in range(len(model.graph.output))]
        if results is None or len(results) != len(wants):
            problems.append(f"{name}: results not found in the output")
            continue
        diffs = [compare(g, w) for g, w in zip(results, wants)]
        diffs = [f"output {i}: {d}" for i, d in enumerate(diffs) if d]
        if diffs and not reason:
            problems.append(f"{name}: wrong value: {'; '.join(diffs)}")
        elif not diffs and reason:
            problems.append(f"{name}: folds now; remove it from "
                            f"EXPECTED_FAILURES ({reason})")
        elif diffs:
            expected += 1
        else:
            equal += 1
    for p in problems:
        print(p)
    print(f"folded node tests: {equal} equal, {expected} expected failures, "
          f"{out_of_scope} out of scope, {len(problems)} unexpected")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
