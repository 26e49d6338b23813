"""Reading and writing float32 safetensors files, as rp-run's --dump-grads,
--init-weights and checkpoints use them, without the safetensors package.

``read(path)`` returns {name: float32 ndarray}; ``write(path, tensors)``
writes {name: array} as float32, atomically (a temporary file renamed).
``write_raw`` is the one writer under it, for tensors of any dtype given as
their bytes (rp.trace writes the weights of a traced model with it).
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


def write_raw(path, entries, metadata=None):
    """Writes ``entries``, (name, safetensors dtype such as "F32" or "BF16",
    shape, little-endian bytes) in order, atomically; returns each tensor's
    file offset (where its bytes start), which IR may point at."""
    header = {"__metadata__": metadata} if metadata else {}
    offset = 0
    for name, dtype, shape, data in entries:
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)  # data starts 8-byte aligned
    tmp = str(path) + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for entry in entries:
            f.write(entry[3])
    os.replace(tmp, path)
    base = 8 + len(text)
    return {name: base + header[name]["data_offsets"][0]
            for name, _, _, _ in entries}


def write(path, tensors):
    write_raw(path, [(name, "F32", np.shape(array),
                      np.ascontiguousarray(array, np.float32).tobytes())
                     for name, array in tensors.items()])
