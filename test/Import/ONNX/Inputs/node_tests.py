"""Imports ONNX's packaged node tests (libonnx-testdata) with rp-import.

Usage: node_tests.py RP_IMPORT DATA_DIR WORK_DIR

A node test is in scope when every node's op type has an rp-import handler;
each such model must import, and its function results must have the shapes
and element types of the model's declared outputs. EXPECTED_FAILURES lists
in-scope tests that rp-import refuses on purpose, with the reason; a listed
test that imports is reported too, so the list stays exact. Out-of-scope
tests (ops rp does not import) are counted, not run.

Prints one line per unexpected result and a summary line
`node tests: N imported, N expected failures, N out of scope`; exits 1 when
anything was unexpected.
"""

import os
import re
import sys

import onnx

from onnx_node_suite import (expected_failure, failed_import, in_scope,
                             node_tests, read_tensor, run_import, tool_list)

# In-scope tests rp refuses on purpose: (regex on the test name, reason).
EXPECTED_FAILURES = [
    (r"^test_(add|sub|mul|div|pow|max|min|equal|less|greater|where|neg|cast|"
     r"reshape|flatten|squeeze|unsqueeze|concat|split|slice|gather|transpose|"
     r"expand|constantofshape|range|shape|identity|trilu|mod|clip|abs|tile|"
     r"reduce_\w+|gemm|matmul)\w*(uint8|uint16|uint32|uint64|int8|int16|"
     r"string|_u?int(8|16)\w*)", "integer types other than int32/int64"),
    (r"^test_cast_(STRING|FLOAT_to_STRING|FLOAT8\w*|\w*FLOAT8\w*)",
     "string and float8 casts"),
    (r"^test_conv_with_autopad_same$", "Conv with auto_pad SAME (pads the "
     "importer would derive)"),
    (r"^test_(edge|reflect)_pad$", "Pad modes other than constant on run-time "
     "values"),
    (r"^test_constant_pad$", "Pad's constant_value as a run-time input"),
    (r"^test_gathernd_\w*batch_dim1$", "GatherND with batch_dims on run-time "
     "data"),
    (r"^test_scatternd_\w*", "ScatterND with a reduction on run-time "
     "values"),
    (r"^test_scatter_elements_(?!with_negative_indices)\w*",
     "ScatterElements other than a slab "
     "write (select_scatter's indices, no reduction)"),
    (r"^test_gather_elements_(1|negative_indices)$|^test_nllloss_(?!NC_"
     r"expanded$|NCd1d2d3_sum_weight_high_ii_expanded$)\w*expanded",
     "GatherElements along an axis other than the last"),
    (r"^test_cumsum\w*", "CumSum's axis as a run-time int32 input (the "
     "tests bind int64 inputs only)"),
    (r"^test_training_dropout\w*", "dropout that drops in training mode"),
    (r"STRING", "string tensors"),
    (r"^test_identity_(opt|sequence)$", "optional and sequence values"),
    (r"^test_pow_types_int(?!64_int64)", "Pow of integer tensors computed "
     "at run time (with constant int64 inputs it folds)"),
    (r"^test_layer_normalization_\w*", "only the first LayerNormalization "
     "output is supported; these tests read Mean and InvStdDev"),
]

ELEMENT = {
    onnx.TensorProto.FLOAT: "f32", onnx.TensorProto.FLOAT16: "f16",
    onnx.TensorProto.BFLOAT16: "bf16", onnx.TensorProto.DOUBLE: "f64",
    onnx.TensorProto.INT64: "i64", onnx.TensorProto.INT32: "i32",
    onnx.TensorProto.BOOL: "i1",
}


def bind_integer_inputs(model, test_dir, out_path):
    """Node tests feed shapes, axes and indices as graph inputs; in exported
    models they are constants, which rp requires. Integer inputs become
    initializers holding the test's own input data. Returns the model path
    to import."""
    inputs = list(model.graph.input)
    bound = False
    for i, value in enumerate(inputs):
        if value.type.tensor_type.elem_type != onnx.TensorProto.INT64:
            continue
        if not os.path.exists(os.path.join(test_dir, "test_data_set_0",
                                           f"input_{i}.pb")):
            continue
        tensor = read_tensor(test_dir, "input", i)
        tensor.name = value.name
        model.graph.initializer.append(tensor)
        model.graph.input.remove(value)
        bound = True
    if not bound:
        return os.path.join(test_dir, "model.onnx")
    onnx.save(model, out_path)
    return out_path


def declared_outputs(model):
    """The tensor types rp prints for the model's outputs, or None when a
    shape is not static."""
    types = []
    for out in model.graph.output:
        tt = out.type.tensor_type
        dims = []
        for d in tt.shape.dim:
            if not d.HasField("dim_value"):
                return None
            dims.append(str(d.dim_value))
        element = ELEMENT.get(tt.elem_type)
        if element is None:
            return None
        types.append("tensor<" + "".join(d + "x" for d in dims) + element + ">")
    return types


def main(rp_import, data_dir, work_dir):
    os.makedirs(work_dir, exist_ok=True)
    # The op types with a handler, from rp-import itself.
    supported = tool_list(rp_import, "--list-ops")
    imported = expected = out_of_scope = 0
    problems = []
    for name, test_dir, model in node_tests(data_dir):
        if not in_scope(model, supported):
            out_of_scope += 1
            continue
        path = bind_integer_inputs(model, test_dir,
                                   os.path.join(work_dir, name + ".onnx"))
        reason = expected_failure(name, EXPECTED_FAILURES)
        proc = run_import(rp_import, [
            path, "-o", "-", "--weights",
            os.path.join(work_dir, name + ".weights.bin")])
        if proc.returncode != 0:
            if reason:
                expected += 1
            else:
                problems.append(failed_import(name, proc))
            continue
        if reason:
            problems.append(f"{name}: imports now; remove it from "
                            f"EXPECTED_FAILURES ({reason})")
            continue
        want = declared_outputs(model)
        header = next((l for l in proc.stdout.splitlines()
                       if "func.func @main" in l), "")
        got = re.findall(r"tensor<[^>]*>", header.split("->", 1)[-1])
        if want is not None and got != want:
            problems.append(f"{name}: results {got}, model declares {want}")
            continue
        imported += 1
    for p in problems:
        print(p)
    print(f"node tests: {imported} imported, {expected} expected failures, "
          f"{out_of_scope} out of scope, {len(problems)} unexpected")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
