"""Reading and writing float32 safetensors files, as rp-run's --dump-grads,
--init-weights and checkpoints use them, without the safetensors package.

``read(path)`` returns {name: float32 ndarray}; ``write(path, tensors)``
writes {name: array} as float32, atomically (a temporary file renamed).
"""

import json
import os
import struct

import numpy as np


def read(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if entry["dtype"] != "F32":
            raise ValueError("%s: tensor '%s' is %s; rp.safetensors reads F32"
                             % (path, name, entry["dtype"]))
        b, e = entry["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + b:8 + n + e],
                                  np.float32).reshape(entry["shape"])
    return out


def write(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        data = np.ascontiguousarray(array, np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(np.shape(array)),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    tmp = str(path) + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    os.replace(tmp, path)
