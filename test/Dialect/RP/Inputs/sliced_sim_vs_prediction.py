"""The sim's step of a sliced plan against the steps rp-compile predicted
for it (the token-slices remark's, and the written plan's in the compile's
summary): argv = the compile's stderr, rp-run --backend sim's stdout, the
tolerance (a fraction). Prints each and whether it agrees; exits 1 when
one does not, so a lit RUN line fails."""
import re
import sys

remark = open(sys.argv[1]).read()
sim = dict(l.split() for l in open(sys.argv[2]) if len(l.split()) == 2)
tolerance = float(sys.argv[3])
m = re.search(r"token slices \(a prediction[^)]*\): (\d+) slices.*?"
              r"predicted step ([\d.]+) ms", remark)
if not m:
    sys.exit("no token-slices remark in " + sys.argv[1])
simulated = float(sim["step_ms"])
plan = re.search(r"rp-compile: .*?; predicted step ([\d.]+) ms on", remark)
ok = True
for what, predicted in ((f"{m.group(1)} slices", float(m.group(2))),
                        ("the plan", float(plan.group(1)) if plan else 0)):
    off = simulated / predicted - 1 if predicted else float("inf")
    ok &= abs(off) <= tolerance
    print(f"{what}: predicted {predicted:.3f} ms, sim {simulated:.3f} ms, "
          f"{'within' if abs(off) <= tolerance else 'NOT within'}"
          f" {tolerance:g}")
sys.exit(0 if ok else 1)
