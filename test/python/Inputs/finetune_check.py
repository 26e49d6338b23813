"""What the finetune tests share: the bundled tiny model folder (made by
examples/tiny_llama/make.py from a config object, tokenizer trained on the
fly, nothing from a hub), and the losses of an exported model on the run's
eval rows next to rp's at the same weights."""
import importlib.util
import sys
from pathlib import Path

import numpy as np
import torch

import rp.finetune  # noqa: F401  (the module; rp.finetune is the function)
from rp import data

finetune_module = sys.modules["rp.finetune"]
ROOT = Path(__file__).resolve().parents[3]


def make_model(out: Path) -> Path:
    spec = importlib.util.spec_from_file_location(
        "make_tiny", ROOT / "examples" / "tiny_llama" / "make.py")
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    return make.make(out)


def torch_loss(model, dataset: Path) -> float:
    """The token-weighted cross-entropy of `model` over every row."""
    d = data.read(dataset)
    with torch.no_grad():
        logits = model(input_ids=torch.from_numpy(d["tokens"].astype(np.int64)),
                       use_cache=False).logits
    labels = torch.from_numpy(d["labels"].astype(np.int64))
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).double(), labels.reshape(-1),
        ignore_index=-100).item()


def rp_loss(run: Path, checkpoint: str = "last") -> float:
    record = __import__("json").loads((run / "finetune.json").read_text())
    return finetune_module.evaluate(
        run / "model.rpplan", run / "checkpoints" / checkpoint /
        "weights.safetensors", run / "eval.rpds", record["global_batch_rows"])


def rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b)
