# RUN: %PYTHON %s | FileCheck %s

# rp's dropout generator in numpy (rp._philox, the mask a PyTorch model
# applies to drop what rp drops) against Random123's philox4x32-10 known
# answers, as runtime/test/PhiloxTest.cpp holds the C++ one (and the values
# below, which tie the two); a mask drops about p of the elements, and is
# the same whole as in slices at their global offsets.

import numpy as np

from rp._philox import dropout_bits, dropout_mask, philox4x32

kat = [((0, 0, 0, 0), (0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
       ((0xffffffff,) * 4, (0xffffffff,) * 2,
        (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
       ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344),
        (0xa4093822, 0x299f31d0),
        (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1))]
print("known answers:",
      all([int(w) for w in philox4x32(c, k)] == list(want) for c, k, want in kat))
seed = 0x123456789abcdef0
bits = dropout_bits(seed, 7, 3, [0, 1, 2, 3, 4, 5, 1000001, (1 << 33) + 2])
print("as PhiloxTest.cpp:", [hex(int(b)) for b in bits] == [
    "0xaba7b3d8", "0x8dce32f5", "0xa3b2baea", "0x5e481fb", "0x226c3135",
    "0x8540d29c", "0x32cb7df", "0x9f3a81d8"])
whole = dropout_mask(seed, 7, 3, (8, 1024), 0.25)
halves = np.concatenate([dropout_mask(seed, 7, 3, (4, 1024), 0.25),
                         dropout_mask(seed, 7, 3, (4, 1024), 0.25, 4096)])
print("slices at their offsets:", bool((whole == halves).all()))
print("dropped about p:", abs(1 - whole.mean() - 0.25) < 0.02)

# CHECK: known answers: True
# CHECK-NEXT: as PhiloxTest.cpp: True
# CHECK-NEXT: slices at their offsets: True
# CHECK-NEXT: dropped about p: True
