# RUN: %PYTHON %s %rp_src_root | FileCheck %s

# bench/claims.py, what bench/paper.py and bench/explain.py print their
# claims with (issue 32): the host ends are the profile's own "unknown"
# ranges (the ones rp-compile and the sim print theirs over), the GPU
# launch and hand-off included; "ahead" is never said of a model of
# kernels rp does not run yet, and never without what it rests on; and the
# host of the model of RoundPipe (one interpreter, its MoE host terms),
# which the sim times (test/Runtime/one-interpreter.test).

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

# "ahead" only where the low end beats the published figure (a tie is
# not ahead), and then with its basis; a bare "ahead" is refused.
for low, high in ((1820, 4867), (1821, 4867), (1000, 1819), (1000, 1820)):
    print(low, high, claims.claim(low, high, 1820, basis="B"))
# CHECK: 1820 4867 level (the range spans it)
# CHECK-NEXT: 1821 4867 ahead: rests on B
# CHECK-NEXT: 1000 1819 behind
# CHECK-NEXT: 1000 1820 level (the range spans it)
print(claims.claim(1821, 4867, 1820, ideal_kernels=True, basis="B"))
# CHECK-NEXT: would be ahead (kernels rp lacks): rests on B
try:
    claims.claim(1821, 4867, 1820)
except ValueError as e:
    print("refused:", e)
# CHECK-NEXT: refused: 'ahead' at 1821 > 1820 needs what it rests on
# Over a grid: whatever the range, "ahead" is said iff its low end beats
# the figure, and always with "rests on".
bad = [(lo, hi) for lo in range(0, 40, 3) for hi in range(lo, 40, 5)
       if ("ahead" in claims.claim(lo, hi, 20, basis="B")) != (lo > 20)
       or ("ahead" in claims.claim(lo, hi, 20, basis="B")
           and "rests on" not in claims.claim(lo, hi, 20, basis="B"))]
print("bad", bad)
# CHECK-NEXT: bad []

# The model of RoundPipe's host: one interpreter for every GPU's dispatch
# work; the MoE rows pageable with the expert loop's host work, the whole
# loop at the slow end, one expert's at mid and the fast end; dense rows
# only the interpreter.
fields = dict(claims.host_ends(base))
for end in ("low", "mid", "mid-whole", "high"):
    h = claims.roundpipe_host(fields[end.split("-")[0]], end,
                              "qwen3-235b-a22b")
    print(end, h["host_interpreters"], h["pinned"], h["moe_host_us"],
          h["optimizer_gbps"])
# CHECK-NEXT: low 1 False 16031 30
# CHECK-NEXT: mid 1 False 125.2 58
# CHECK-NEXT: mid-whole 1 False 16031 58
# CHECK-NEXT: high 1 False 125.2 100
print(sorted(claims.roundpipe_host(fields["mid"], "mid", "qwen3-32b")))
# CHECK-NEXT: ['gpus_per_link', 'host_dram_gbps', 'host_interpreters', 'job_us', 'launch_us', 'optimizer_gbps']
print(f"{claims.ideal_scaling('qwen3-235b-a22b'):.2f}")
# CHECK-NEXT: 7.92

# Pageable weights only where RoundPipe's run had them: its LoRA script
# (the 235B) passes pin_model="off"; its train.py (the 20B) keeps the
# default pinned weights.
for model in ("qwen3-235b-a22b", "gpt-oss-20b", "qwen3-32b"):
    h = claims.roundpipe_host(fields["mid"], "mid", model)
    print(model, h.get("pinned", "pinned"), h.get("moe_host_us"))
# CHECK-NEXT: qwen3-235b-a22b False 125.2
# CHECK-NEXT: gpt-oss-20b pinned 25.0
# CHECK-NEXT: qwen3-32b pinned None
