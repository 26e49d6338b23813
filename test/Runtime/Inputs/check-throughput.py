"""Checks rp-run --metrics' tokens_per_s: no step's is above 8 times the
run's median. With two passes in flight the steps end in uneven pairs; a
step timed from the end of the one just before it gave millions of
tokens/s (26 to 350 times the median; timed over the passes in flight, at
most about 2)."""
import json
import statistics
import sys

rates = [json.loads(line)["tokens_per_s"] for line in open(sys.argv[1])]
median = statistics.median(rates)
print(f"{len(rates)} steps, tokens_per_s at most 8x the median: "
      f"{max(rates) <= 8 * median}")
