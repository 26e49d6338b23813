"""Writes a changed copy of a .safetensors file, for the tests of what a
load refuses (nonfinite.test).

Usage: tamper_safetensors.py IN OUT set SUFFIX VALUE
           element 0 of the first tensor whose name ends in SUFFIX (f32)
           becomes VALUE (a Python float: nan, inf, -1, 3e38)
       tamper_safetensors.py IN OUT overlap
           the second tensor's data_offsets start inside the first's
       tamper_safetensors.py IN OUT empty
           a header with no tensors (only __metadata__)
       tamper_safetensors.py IN OUT claim COUNT
           COUNT more tensors, each claiming the whole data section: a
           small file asking for COUNT times its size
"""

import json
import struct
import sys


def main(argv):
    src, out, what = argv[0], argv[1], argv[2]
    raw = open(src, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = bytearray(raw[8 + n:])
    names = [k for k in header if k != "__metadata__"]
    if what == "set":
        name = next(k for k in names if k.endswith(argv[3]))
        begin = header[name]["data_offsets"][0]
        data[begin:begin + 4] = struct.pack("<f", float(argv[4]))
    elif what == "overlap":
        # Names in file order: the second starts 4 bytes into the first,
        # keeping its own length, so every range stays inside the file.
        ordered = sorted(names, key=lambda k: header[k]["data_offsets"][0])
        first, second = ordered[0], ordered[1]
        b0 = header[first]["data_offsets"][0]
        b, e = header[second]["data_offsets"]
        header[second]["data_offsets"] = [b0 + 4, b0 + 4 + (e - b)]
    elif what == "claim":
        for i in range(int(argv[3])):
            header["claim.%d" % i] = {"dtype": "U8", "shape": [len(data)],
                                      "data_offsets": [0, len(data)]}
    elif what == "empty":
        header = {"__metadata__": {"format": "pt"}}
        data = bytearray()
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + bytes(data))


if __name__ == "__main__":
    main(sys.argv[1:])
