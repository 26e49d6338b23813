"""A small model for the ``python -m rp`` tests: ``make()`` builds it and
``write_batch(DIR)`` writes a global batch of tokens and labels and a
microbatch of tokens to trace with as .npy files."""

import sys

import numpy as np
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.ff = nn.Linear(d, d)

    def forward(self, x):
        return x + torch.relu(self.ff(self.norm(x)))


class Model(nn.Module):
    def __init__(self, vocab=32, d=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.Sequential(Block(d), Block(d))
        self.head = nn.Linear(d, vocab)

    def forward(self, tokens):
        return self.head(self.blocks(self.embed(tokens)))


def make():
    return Model()


not_a_model = 42


def write_batch(folder):
    rng = np.random.default_rng(0)
    np.save(f"{folder}/tokens.npy", rng.integers(0, 32, (4, 8)))
    np.save(f"{folder}/labels.npy", rng.integers(0, 32, (4, 8)))
    np.save(f"{folder}/microbatch.npy", rng.integers(0, 32, (2, 8)))


if __name__ == "__main__":
    write_batch(sys.argv[1])
