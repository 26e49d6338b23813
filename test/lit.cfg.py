# -*- Python -*-
# lit configuration of the rp regression tests. Configured paths live in
# lit.site.cfg.py; the logic lives here.

import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "RP"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".onnxtext", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.rp_obj_root, "test")
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py",
                   "make_models.py", "onnxtext.py"]

config.substitutions.append(("%PYTHON", config.python_executable))
config.substitutions.append(("%rp_src_root", config.rp_src_root))
config.substitutions.append(("%models", config.rp_test_models))
# %make-onnx turns the running .onnxtext test into %t.onnx; it expands to
# text holding %s and %t, hence the second round of expansion.
config.recursiveExpansionLimit = 3
config.substitutions.append(
    ("%make-onnx", f"{config.python_executable} "
     f"{os.path.join(config.rp_src_root, 'test/Import/ONNX/onnxtext.py')} %s %t.onnx")
)

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
# python/rp finds the tools of this build first.
llvm_config.with_environment("RP_BIN", config.rp_tools_dir)
llvm_config.with_environment(
    "PYTHONPATH", os.path.join(config.rp_src_root, "python"), append_path=True
)

# --param rp_run=PATH runs another rp-run (scripts/test.sh: the
# ThreadSanitizer build's, over the multi-process tests).
rp_run = lit_config.params.get("rp_run")
tools = ["rp-opt", "rp-import", "rp-translate", "rp-compile",
         ToolSubst("rp-run", command=rp_run) if rp_run else "rp-run"]
llvm_config.add_tool_substitutions(tools, [config.rp_tools_dir, config.llvm_tools_dir])
# The cuDNN ahead-of-time checker, built where cuDNN and its frontend are.
if os.path.exists(os.path.join(config.rp_tools_dir, "rp-cudnn-device")):
    config.available_features.add("cudnn-device")
    llvm_config.add_tool_substitutions(["rp-cudnn-device"], [config.rp_tools_dir])

# RP_CHECK_ROUNDTRIP=1 makes every rp-opt run also check that its output
# parses back to the same IR.
if os.environ.get("RP_CHECK_ROUNDTRIP"):
    config.substitutions.insert(0, ("rp-opt", "rp-opt --verify-roundtrip"))

# One thread each for torch's and numpy's own pools (OpenMP, OpenBLAS and
# MKL read OMP_NUM_THREADS): lit already runs one test per core,
# and a test's torch starting a thread per core as well put 2 x 2 threads
# on CI's 2 cores, spinning for work between small ops. Measured (CPU s of
# a test, one at a time on the 2-core box): torch2-families-4.test 30.5 ->
# 23.7, torch2-moe.py 23.1 -> 15.2, torch2-moe-topk-softmax.py 17.1 ->
# 12.6; tests mostly in rp's tools unchanged. rp's own tools size their
# pools by the cores (std::thread), which this leaves alone; no test relies
# on torch's thread count (its results are compared within tolerances).
config.environment["OMP_NUM_THREADS"] = "1"
