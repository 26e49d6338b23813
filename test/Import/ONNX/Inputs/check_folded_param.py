"""Reads the values of the folded params of an imported .mlir from its
weights file and compares them with numpy's float32 sin of 0, 1, 2, ...

Usage: check_folded_param.py MODEL.mlir WEIGHTS.bin"""

import re
import sys

import numpy as np

text = open(sys.argv[1]).read()
data = open(sys.argv[2], "rb").read()
for name, offset, count in re.findall(
        r'rp\.param "([^"]*:folded)" at "[^"]*"\[(\d+)\] : '
        r'tensor<(\d+)xf32>', text):
    got = np.frombuffer(data, np.float32, int(count), int(offset))
    want = np.sin(np.arange(int(count), dtype=np.float32))
    ulp = np.spacing(np.abs(want).astype(np.float32))
    ok = bool(np.all(np.abs(got - want) <= 2 * ulp))
    print(f"{name}: {count} values equal to numpy's float32 sin: {ok}")
