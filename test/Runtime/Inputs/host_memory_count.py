"""rp-compile's host memory against what rp-run allocates and its peak RSS.

Usage: host_memory_count.py RP_COMPILE_SUMMARY RP_RUN_STDERR PEAK_KIB TOL

Reads the summary's "host memory X: ..." (each part), rp-run's "host memory
allocated N bytes" line (its plan buffers in every slot and the trainer's
state, counted where they are allocated) and rp-run's peak resident set
(KiB), and prints one line per check:
  - "count within TOL": |predicted - allocated| <= TOL x allocated, TOL the
    stated tolerance (the runtime allocates each pinned staging buffer
    whole and the inputs per slot, where the compiler's pinned buffers are
    packed by their live ranges and the inputs not counted);
  - "peak covers the count": the peak RSS is at least the allocated bytes
    (every allocation is written when the run starts, so it is resident);
  - "peak within count + arenas + 96 MiB": the rest of the peak is the host
    backend's device arenas (host memory on this backend) and the process
    itself (code, threads, the plan).
"""
import re
import sys

UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def size(text):
    value, unit = text.split()
    return float(value) * UNITS[unit]


summary = open(sys.argv[1]).read()
run = open(sys.argv[2]).read()
peak = int(sys.argv[3]) * 1024
tol = float(sys.argv[4])
m = re.search(r"host memory ([0-9.]+ .iB): base ([0-9.]+ .iB), trained "
              r"weights and gradients ([0-9.]+ .iB), optimizer state "
              r"([0-9.]+ .iB), pinned buffers ([0-9.]+ .iB)"
              r"(?:, the second pass in flight ([0-9.]+ .iB))?", summary)
total = size(m.group(1))
parts = sum(size(g) for g in m.groups()[1:] if g)
# The parts add up to the total (each rounded to 2 decimals).
assert abs(parts - total) <= 0.01 * total + (2 << 10), (parts, total)
got = re.search(r"host memory allocated (\d+) bytes .*optimizer state (\d+)",
                run)
allocated, trainer = int(got.group(1)), int(got.group(2))
arenas = re.search(r"([0-9.]+) KiB of device buffers in all", run)
arena = float(arenas.group(1)) * 1024 if arenas else 0
if not arenas:
    per = re.search(r"device buffers per device: ([0-9. ]+) KiB", run)
    arena = sum(float(x) for x in per.group(1).split()) * 1024
diff = abs(total - allocated) / allocated
print("predicted %.0f allocated %d (trainer %d): %.2f %% apart, %s" %
      (total, allocated, trainer, diff * 100,
       "count within %g" % tol if diff <= tol else "OVER %g" % tol))
print("peak covers the count" if peak >= allocated else
      "peak %d BELOW the count %d" % (peak, allocated))
bound = allocated + arena + (96 << 20)
print("peak within count + arenas + 96 MiB" if peak <= bound else
      "peak %d OVER %d" % (peak, bound))
