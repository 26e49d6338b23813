# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t | FileCheck %s

# HRM (transformers 5.24's HrmTextForCausalLM, bench/families.py's shrunk
# config) through both ONNX exporters. Its early recurrent cycles run the L
# stack under torch.no_grad() (a k-step gradient: PyTorch's gradient flows
# through the last cycles only), which ONNX cannot record: exported as
# ordinary ops, rp trained the gradient with gradients on throughout (33 of
# 34 differed). Within rp.onnx_forms.exportable(model) each such call's
# output goes through rp::stop_gradient, one node StopGradient of the
# domain rp on both exporters (dynamo through
# rp.onnx_symbolics.dynamo_table()), which rp-import maps to
# rp.stop_gradient. Checked on each path as bench/families.py checks it:
# the loss within 1e-4 of PyTorch's, every gradient by its parameter name
# within 1e-4, 4 devices bitwise equal to 1 (also the check that the
# 4-device plan's planned peak covers the runtime's rotating arenas, which
# hold every device's rotary tables: rp-run refused it before).

import sys
from pathlib import Path

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent / "Inputs"))
import family_paths_check  # noqa: E402
from family_paths_check import families  # noqa: E402

out = Path(sys.argv[1])
model = families.build("hrm_text")
family_paths_check.check_paths(model, out, ("torchscript", "dynamo"),
                                devices=4)
# CHECK: torchscript: loss True, 34 of 34 gradients within 1e-4, 4 devices bitwise True
# CHECK: dynamo: loss True, 34 of 34 gradients within 1e-4, 4 devices bitwise True

# One marker per no-grad call of the L stack (3 of its 6 calls).
for path in ("torchscript", "dynamo"):
    graph = onnx.load(str(out / f"{path}.onnx"), load_external_data=False)
    marks = [n for n in graph.graph.node
             if (n.domain, n.op_type) == ("rp", "StopGradient")]
    print(f"{path}: {len(marks)} StopGradient")
# CHECK: torchscript: 3 StopGradient
# CHECK: dynamo: 3 StopGradient

# The hooks are gone after the export: the model runs as before.
hooked = sum(len(m._forward_hooks) + len(m._forward_pre_hooks)
             for m in model.modules())
print("hooks left:", hooked)
# CHECK: hooks left: 0
