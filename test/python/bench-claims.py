# RUN: %PYTHON %s %rp_src_root | FileCheck %s

# bench/claims.py, what bench/paper.py and bench/explain.py print their
# claims with (issue 32): the host ends are the profile's own "unknown"
# ranges (the ones rp-compile and the sim print theirs over), the GPU
# launch and hand-off included; "ahead" is never said of a model of
# kernels rp does not run yet; and the model of RoundPipe that accounts for
# its 235B scaling, its expert loop's host work on one interpreter.

import json
import sys
from pathlib import Path

root = Path(sys.argv[1])
sys.path.insert(0, str(root / "bench"))
import claims  # noqa: E402

base = json.loads((root / "profiles/rtx4090.json").read_text())
for label, fields in claims.host_ends(base):
    print(label, sorted(fields.items()))
# CHECK: low [('gpus_per_link', 4), ('host_dram_gbps', 100), ('job_us', 60), ('launch_us', 8), ('optimizer_gbps', 30)]
# CHECK: mid [('gpus_per_link', 1), ('host_dram_gbps', 200), ('job_us', 30), ('launch_us', 4), ('optimizer_gbps', 58)]
# CHECK: high [('gpus_per_link', 1), ('host_dram_gbps', 300), ('job_us', 10), ('launch_us', 2), ('optimizer_gbps', 100)]

# The variants fix every unknown input, so the sim times each once.
import tempfile  # noqa: E402
with tempfile.TemporaryDirectory() as tmp:
    for label, path in claims.host_variants(base, tmp, "t"):
        p = json.loads(Path(path).read_text())
        print(label, "unknown" in p, p["launch_us"], p["job_us"])
# CHECK: low False 8 60
# CHECK: mid False 4 30
# CHECK: high False 2 10

print(claims.verdict(4168, 4867, 1820))
print(claims.verdict(4168, 4867, 1820, ideal_kernels=True))
print(claims.verdict(9396, 21605, 18122, ideal_kernels=True))
# CHECK: ahead
# CHECK-NEXT: would be ahead (kernels rp lacks)
# CHECK-NEXT: level (the range spans it)

# RoundPipe's 8 device threads share one interpreter: its expert loop's
# host work per routing (bench/moe_host.py, the whole loop) bounds 8 GPUs.
print(f"{claims.serial_host_ceiling('qwen3-235b-a22b', 16031):.0f}")
print(f"{claims.serial_host_ceiling('gpt-oss-20b', 801):.0f}")
print(f"{claims.ideal_scaling('qwen3-235b-a22b'):.2f}")
# CHECK: 1812
# CHECK-NEXT: 142045
# CHECK-NEXT: 7.92
