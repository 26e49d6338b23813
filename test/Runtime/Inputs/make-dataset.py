"""Writes the datasets of dataset.test into DIR: rows.rpds (7 rows of 16
tokens below 64, some labels -100, one row with none trained but one), and
ordered.rpds: the 24 rows rp-run reads from rows.rpds in 4 steps of 6 rows
with --shuffle-seed 5 (rp.data.batch_rows), in file order; and bad.rpds
(rows of 8 tokens)."""
import sys
from pathlib import Path

import numpy as np

from rp import data

out = Path(sys.argv[1])
rng = np.random.default_rng(0)
tokens = rng.integers(0, 64, (7, 16)).astype(np.int32)
labels = np.roll(tokens, -1, axis=1)
labels[:, -1] = -100
labels[2, :10] = -100        # a prompt
labels[4, 1:] = -100         # padding after one trained token
segments = np.zeros_like(tokens)
data.write(out / "rows.rpds", tokens, labels, segments, 7, 64)
rows = [r for s in range(4) for r in data.batch_rows(7, 6, s, 5)]
data.write(out / "ordered.rpds", tokens[rows], labels[rows], segments[rows],
           24, 64)
data.write(out / "bad.rpds", tokens[:, :8], labels[:, :8], segments[:, :8], 7)
print("epochs read:", sorted(set(p // 7 for p in range(24))), "first rows:",
      rows[:7])
