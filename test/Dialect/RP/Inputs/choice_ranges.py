"""Reads rp-partition's output (stdin) and checks that the recompute
choice's ranges bracket its two plans' steps: each plan's fast end <= its
step at the profile's own values <= its slow end."""
import re
import sys

text = sys.stdin.read()
choice = re.search(r'rp\.recompute_choice = "([^"]*)"', text).group(1)
mids = {g: float(v) for v, g in re.findall(
    r"([0-9.]+) ms (?:a step )?at (stage|layer) grain", choice)}
ends = {g: (float(a), float(b)) for g, a, b in re.findall(
    r"(stage|layer) grain ([0-9.]+) - ([0-9.]+) ms", choice)}
print("; ".join(
    f"{g} grain: fast <= mid <= slow: "
    f"{ends[g][0] <= mids[g] * (1 + 1e-6) and mids[g] <= ends[g][1] * (1 + 1e-6)}"
    for g in ("stage", "layer")))
