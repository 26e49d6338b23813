"""The sim's step of a sliced plan against the step rp-compile predicted
for it: argv = the compile's stderr, rp-run --backend sim's stdout, the
tolerance (a fraction). Prints both and whether they agree; exits 1 when
they do not, so a lit RUN line fails."""
import re
import sys

remark = open(sys.argv[1]).read()
sim = dict(l.split() for l in open(sys.argv[2]) if len(l.split()) == 2)
tolerance = float(sys.argv[3])
m = re.search(r"token slices \(a prediction[^)]*\): (\d+) slices.*?"
              r"predicted step ([\d.]+) ms", remark)
if not m:
    sys.exit("no token-slices remark in " + sys.argv[1])
predicted, simulated = float(m.group(2)), float(sim["step_ms"])
off = simulated / predicted - 1
print(f"{m.group(1)} slices: predicted {predicted:.3f} ms, sim "
      f"{simulated:.3f} ms, {'within' if abs(off) <= tolerance else 'NOT within'}"
      f" {tolerance:g}")
sys.exit(0 if abs(off) <= tolerance else 1)
