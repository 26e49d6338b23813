# RUN: rm -rf %t && mkdir -p %t
# RUN: %PYTHON %s %t %models/gpt_op17.onnx | FileCheck %s

# rp.train(accumulate=K) runs rp-run --accumulate K: K passes of the plan's
# microbatches per optimizer step, each loss the step's mean over all of
# them. Two passes of one microbatch give the bits of one pass of two (the
# same chain of adds), on 2 devices with the same stages; a bad K is a
# ValueError before anything runs.

import sys
from pathlib import Path

import rp

out = Path(sys.argv[1])
model = sys.argv[2]
stages = "fwd:1,1;bwd:2,1,1"
one = rp.compile(model, out / "m1.rpplan", devices=2, microbatches=1,
                 stages=stages)
two = rp.compile(model, out / "m2.rpplan", devices=2, microbatches=2,
                 stages=stages)
accumulated = list(rp.train(one, steps=4, sync=True, accumulate=2))
whole = list(rp.train(two, steps=4, sync=True))
# CHECK: 4 losses, accumulated == one pass of 2: True
print(len(accumulated), "losses, accumulated == one pass of 2:",
      accumulated == whole)
# CHECK-NEXT: 4 losses, K=1 differs from K=2: True
single = list(rp.train(one, steps=4, sync=True))
print(len(single), "losses, K=1 differs from K=2:", single != accumulated)
for bad in (0, -1, 1.5, True):
    try:
        list(rp.train(one, accumulate=bad))
    except ValueError as err:
        # CHECK-NEXT: ValueError: accumulate=0: give the number of passes per optimizer step, an int of 1 or more
        # CHECK-NEXT: ValueError: accumulate=-1:
        # CHECK-NEXT: ValueError: accumulate=1.5:
        # CHECK-NEXT: ValueError: accumulate=True:
        print("ValueError:", err)
