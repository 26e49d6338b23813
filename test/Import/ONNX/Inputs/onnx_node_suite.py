"""What node_tests.py and folded_node_tests.py share: walking ONNX's
packaged node tests, deciding which are in scope, reading a test's data,
matching a test against the list of refusals rp makes on purpose, and
running rp-import on one model and classifying how it failed.
"""

import os
import re
import subprocess

import onnx

# The opsets rp imports.
MIN_OPSET, MAX_OPSET = 13, 21


def node_tests(data_dir):
    """(name, test folder, model) for every node test under `data_dir`, in
    name order."""
    for name in sorted(os.listdir(data_dir)):
        test_dir = os.path.join(data_dir, name)
        path = os.path.join(test_dir, "model.onnx")
        if os.path.exists(path):
            yield name, test_dir, onnx.load(path, load_external_data=False)


def in_scope(model, ops):
    """Whether every node is a default-domain op among `ops` and the opset is
    one rp imports."""
    opset = max((o.version for o in model.opset_import
                 if o.domain in ("", "ai.onnx")), default=0)
    return ({n.op_type for n in model.graph.node} <= ops and
            MIN_OPSET <= opset <= MAX_OPSET and
            all(n.domain in ("", "ai.onnx") for n in model.graph.node))


def read_tensor(test_dir, kind, i):
    """The TensorProto of the test's `kind` ("input" or "output") `i`."""
    tensor = onnx.TensorProto()
    with open(os.path.join(test_dir, "test_data_set_0", f"{kind}_{i}.pb"),
              "rb") as f:
        tensor.ParseFromString(f.read())
    return tensor


def expected_failure(name, table):
    """The reason `table` ((regex on the test name, reason) pairs) gives for
    `name`, or None."""
    for pattern, reason in table:
        if re.search(pattern, name):
            return reason
    return None


def run_import(rp_import, args):
    return subprocess.run([rp_import] + args, capture_output=True, text=True)


def failed_import(name, proc):
    """The problem line of a failed rp-import: refused with a diagnostic, or
    crashed."""
    if proc.returncode == 1 and "error:" in proc.stderr:
        return f"{name}: refused: {proc.stderr.strip().splitlines()[0]}"
    return f"{name}: crashed with exit code {proc.returncode}"


def tool_list(rp_import, flag):
    """The words rp-import prints for a listing flag (--list-ops, ...)."""
    return set(subprocess.run([rp_import, flag], check=True,
                              capture_output=True, text=True).stdout.split())
