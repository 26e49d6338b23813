"""Writes malformed .npy and .safetensors files for the reader tests.

python malformed.py OUT_DIR writes OUT_DIR/npy-<case>.npy and
OUT_DIR/st-<case>.safetensors; each file is wrong in one way that the
runtime's readers must refuse with exit 1 and a message (FileIO.h).
"""

import json
import os
import struct
import sys


def npy(header, data=b""):
    """An .npy file (version 1.0) with `header` as its dict text."""
    text = header + " " * (63 - (10 + len(header)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text.encode() + data


def safetensors(header, data=b"", length=None):
    """A .safetensors file with `header` (a JSON-able object) and `data`."""
    text = json.dumps(header).encode()
    n = len(text) if length is None else length
    return struct.pack("<Q", n) + text + data


def main(out):
    good = "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 16), }"
    data = bytes(2 * 16 * 8)
    npys = {
        # A dimension of 20 digits overflows 64 bits.
        "overflow-dim": npy(good.replace("(2, 16)", "(99999999999999999999, 16)"), data),
        # Each dimension fits, their product does not.
        "overflow-product": npy(good.replace("(2, 16)", "(4294967296, 4294967296)"), data),
        # Empty, but its nonzero dimensions overflow: numpy refuses it too.
        "overflow-empty": npy(good.replace("(2, 16)", "(999000000000, 9991998, 0)"), b""),
        "negative-dim": npy(good.replace("(2, 16)", "(-2, 16)"), data),
        "not-a-tuple": npy(good.replace("(2, 16)", "(2, x)"), data),
        "rank-40": npy(good.replace("(2, 16)", "(" + "1, " * 40 + ")"), data),
        "truncated": npy(good, data[:-8]),
        "oversized": npy(good, data + bytes(8)),
        "no-descr": npy(good.replace("'descr'", "'kind'"), data),
        # The header length field points past the end of the file.
        "header-past-end": b"\x93NUMPY\x01\x00\xff\xff{'descr'",
        "version-9": b"\x93NUMPY\x09\x00" + bytes(8),
        # Valid files numpy loads, which a regex reader overflowed its
        # stack on: a 60 KB header and 32,000 spaces in the shape tuple.
        "header-60k": npy(good.replace("'descr':", "'descr':" + " " * 60000),
                          data),
        "shape-spaces": npy(good.replace("(2, 16)", "(2," + " " * 32000 + "16)"),
                            data),
        # Python accepts either quote; Fortran order must never read as C.
        "fortran-double-quotes": npy(
            good.replace("'fortran_order': False", '"fortran_order": True'),
            data),
        "double-quotes": npy(
            '{"descr": "<i8", "fortran_order": False, "shape": (2, 16), }', data),
        "unknown-key": npy(good.replace("}", "'extra': 1, }"), data),
        "key-twice": npy(good.replace("}", "'shape': (2, 16), }"), data),
    }
    for name, content in npys.items():
        with open(os.path.join(out, "npy-" + name + ".npy"), "wb") as f:
            f.write(content)

    def entry(**fields):
        e = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
        e.update(fields)
        return {"w": e}

    sts = {
        "entry-list": safetensors({"w": [1, 2]}, bytes(8)),
        "dtype-number": safetensors(entry(dtype=3), bytes(8)),
        "shape-string": safetensors(entry(shape="2"), bytes(8)),
        "shape-float": safetensors(entry(shape=[2.5]), bytes(8)),
        "shape-negative": safetensors(entry(shape=[-2]), bytes(8)),
        "shape-overflow": safetensors(entry(shape=[2**62, 2**62]), bytes(8)),
        "offsets-strings": safetensors(entry(data_offsets=["0", "8"]), bytes(8)),
        "offsets-negative": safetensors(entry(data_offsets=[-8, 0]), bytes(8)),
        "offsets-past-end": safetensors(entry(data_offsets=[0, 2**64 - 1]), bytes(8)),
        "truncated": safetensors(entry(), bytes(4)),
        "header-past-end": safetensors(entry(), bytes(8), length=2**63),
        "not-json": struct.pack("<Q", 4) + b"{{{{",
    }
    for name, content in sts.items():
        with open(os.path.join(out, "st-" + name + ".safetensors"), "wb") as f:
            f.write(content)


if __name__ == "__main__":
    main(sys.argv[1])
