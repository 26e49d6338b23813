"""Reads the scalars of a TensorBoard event file (TFRecords of Event
protobufs) with tensorboardX's own proto classes: {tag: [(step, value)]}."""
import struct
from collections import defaultdict

from tensorboardX.proto import event_pb2


def scalars(path):
    out = defaultdict(list)
    data = open(path, "rb").read()
    at = 0
    while at < len(data):
        (length,) = struct.unpack_from("<Q", data, at)
        event = event_pb2.Event.FromString(data[at + 12:at + 12 + length])
        at += 12 + length + 4
        for value in event.summary.value:
            out[value.tag].append((event.step, value.simple_value))
    return dict(out)
