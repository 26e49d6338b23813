"""The harness of the torch2-onnx-*.py tests: a small LM (an embedding of 64
tokens, two blocks of the test's own layer, a head) checked on both ONNX
exporters' paths as bench/families.py checks a family: the loss within 1e-4
of PyTorch's, every gradient by its parameter name within 1e-4, 2 devices
bitwise equal to 1. One line per path, for the test's CHECK lines:

    torchscript: loss True, grads True (N of N gradients ...), bitwise True, None
"""

import sys
from pathlib import Path

import torch
import torch.nn as nn

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
import families  # noqa: E402


class LM(nn.Module):
    """Embedding, ``layer()`` twice, head. With ``tokens_to_layers`` each
    layer is called as ``layer(h, tokens)`` (a layer that reads the token
    ids), else ``layer(h)``."""

    def __init__(self, layer, width=16, tokens_to_layers=False):
        super().__init__()
        self.emb = nn.Embedding(64, width)
        self.layers = nn.ModuleList([layer(), layer()])
        self.head = nn.Linear(width, 64)
        self.tokens_to_layers = tokens_to_layers

    # input_ids: the name rp.trace gives the plan's input (the ONNX paths
    # name it so at export), which check_path feeds.
    def forward(self, input_ids):
        h = self.emb(input_ids)
        for layer in self.layers:
            h = layer(h, input_ids) if self.tokens_to_layers else layer(h)
        return self.head(h)


def check_both_paths(layer, out, width=16, tokens_to_layers=False,
                     paths=("torchscript", "dynamo")):
    """Builds the LM of ``layer`` (seed 0), draws its tokens and labels, and
    checks it on the TorchScript and the dynamo path (or ``paths``), each
    in its own folder under ``out``."""
    torch.manual_seed(0)
    model = LM(layer, width, tokens_to_layers)
    tokens = torch.randint(0, 64, (families.M, 16))
    labels = torch.randint(0, 64, (families.M, 16))
    ref = families.reference(model, tokens, labels)
    out = Path(out)
    for path in paths:
        (out / path).mkdir(parents=True, exist_ok=True)
        cell = families.check_path(path, model, ref, tokens, labels,
                                   out / path)
        print(f"{path}: loss {cell['loss']}, grads {cell['grads']} "
              f"({cell['detail']}), bitwise {cell['bitwise']}, "
              f"{cell['reason']}")
