"""Copies a checkpoint once per malformed state.json, for the tests.

python bad_states.py CHECKPOINT OUT_DIR writes OUT_DIR/<case>/, a copy of
CHECKPOINT whose state.json is wrong in one way: a field of the wrong JSON
type or out of range. Resuming from each must exit 1 with a message.
"""

import json
import os
import shutil
import sys


def main(checkpoint, out):
    with open(os.path.join(checkpoint, "state.json")) as f:
        good = json.load(f)
    cases = {
        "step-negative": {"step": -1},
        "step-huge": {"step": 2**40},
        "step-string": {"step": "1"},
        "sync-string": {"sync": "yes"},
        "optimizer-number": {"optimizer": 3},
        "loss-scale-negative": {"loss_scale": -1.5},
        "step-loss-scale-string": {"step_loss_scale": "1"},
        "updates-past-step": {"updates": 5},
        "data-position-float": {"data_position": 0.5},
    }
    for name, change in cases.items():
        folder = os.path.join(out, name)
        shutil.copytree(checkpoint, folder)
        state = dict(good, **change)
        with open(os.path.join(folder, "state.json"), "w") as f:
            json.dump(state, f)
    folder = os.path.join(out, "not-object")
    shutil.copytree(checkpoint, folder)
    with open(os.path.join(folder, "state.json"), "w") as f:
        f.write("[1, 2]")
    folder = os.path.join(out, "state-folder")
    shutil.copytree(checkpoint, folder)
    os.remove(os.path.join(folder, "state.json"))
    os.mkdir(os.path.join(folder, "state.json"))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
