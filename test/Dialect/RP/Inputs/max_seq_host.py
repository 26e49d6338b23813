"""Reads rp-compile's --report-max-seq remarks with token slices, without a
host budget (FREE) and with --host-budget-gib GIB (HOST), and checks the
host bound: the bounded answer is shorter than the devices' alone, the
host memory the remark gives at it is within the budget, and at the next
length the bisection refused it is over the budget.

Usage: max_seq_host.py FREE HOST GIB
"""
import re
import sys

UNITS = {"GiB": 2**30, "MiB": 2**20, "KiB": 2**10}


def read(path):
    text = open(path).read()
    m = re.search(r"the largest sequence that fits is (\d+) tokens.*?the host "
                  r"holds about ([\d.]+) (GiB|MiB|KiB) there", text)
    if not m:
        sys.exit(f"{path}: no sliced largest sequence with its host memory")
    return int(m.group(1)), float(m.group(2)) * UNITS[m.group(3)], text


free, free_host, _ = read(sys.argv[1])
bound, bound_host, text = read(sys.argv[2])
budget = float(sys.argv[3]) * 2**30
nxt = re.search(r"the bound: at (\d+) tokens the slices still fit the "
                r"devices, the host would need ([\d.]+) (GiB|MiB|KiB)", text)
ok = (bound < free and bound_host <= budget * 1.001 and nxt is not None
      and int(nxt.group(1)) > bound
      and float(nxt.group(2)) * UNITS[nxt.group(3)] >= budget * 0.995)
print("host bound", "holds" if ok else "BROKEN", free, bound, free_host,
      bound_host, nxt.groups() if nxt else None)
