# RUN: %PYTHON %s %S/Inputs/scale.mlir | FileCheck %s
# RUN: %PYTHON -m rp opt %S/Inputs/scale.mlir --canonicalize | FileCheck %s --check-prefix=MAIN
# RUN: (%PYTHON -m rp no-such-tool 2>&1; echo "exit $?") | FileCheck %s --check-prefix=MISSING

# rp.opt runs rp-opt found through RP_BIN and returns the printed IR; a
# failing tool becomes rp.ToolError carrying the diagnostics.

import os
import sys
import tempfile
from pathlib import Path

import rp

src = Path(sys.argv[1])

# CHECK: tool rp-opt
print("tool", rp.find_tool("rp-opt").name)

# CHECK-LABEL: func.func @scale
# CHECK-NOT: rp.mul
# CHECK: return %arg0
print(rp.opt(src, ["rp-verify-graph", "canonicalize"]))

with tempfile.TemporaryDirectory() as tmp:
    out = Path(tmp) / "out.mlir"
    text = rp.opt(src, ["canonicalize"], out=out)
    # CHECK: written True
    print("written", out.read_text() == text)

    bad = Path(tmp) / "bad.mlir"
    bad.write_text(
        'func.func @f(%x: tensor<2xf32>) {\n'
        '  %0 = rp.reshape %x : tensor<2xf32> to tensor<3xf32>\n'
        '  return\n}\n'
    )
    try:
        rp.opt(bad)
    except rp.ToolError as err:
        # CHECK: ToolError rp-opt 1
        print("ToolError", err.tool, err.returncode)
        # CHECK: bad.mlir:2:8: error: 'rp.reshape' op expected the same element count
        print(err.stderr.strip().splitlines()[0].replace(tmp + "/", ""))

os.environ["RP_BIN"] = "/nonexistent"
os.environ["PATH"] = "/nonexistent"
try:
    rp.find_tool("rp-missing")
except rp.ToolNotFoundError as err:
    # CHECK: cannot find 'rp-missing' in /nonexistent, {{.*}}build/bin, PATH
    print(err)

# MAIN: func.func @scale
# MAIN-NEXT: return %arg0
# MISSING: error: cannot find 'rp-no-such-tool'
# MISSING: exit 1
