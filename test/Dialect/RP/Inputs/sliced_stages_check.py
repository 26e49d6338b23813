"""Stages chosen with the token slices (rp-predict-token-slices with
search-stages, rp-compile's default): argv = the compile's stderr, then
optionally rp-run --backend sim's stdout for the plan with the stages
chosen and for the plan compiled with the unsliced plan's stages given
(--stages). Prints whether the chosen stages differ from the unsliced
plan's, whether their predicted step is lower, whether the plan written has
them, and (with the sims) whether the plan runs faster on the sim; exits 1
where one does not hold, so a lit RUN line fails."""
import re
import sys

remark = open(sys.argv[1]).read()
m = re.search(r"stages chosen with the slices: (\S+), predicted step "
              r"([\d.]+) ms; the unsliced plan's stages (\S+) would take "
              r"([\d.]+) ms with (\d+) slices", remark)
if not m:
    sys.exit("no stages chosen with the slices in " + sys.argv[1])
chosen, chosen_ms, unsliced, unsliced_ms = (m.group(1), float(m.group(2)),
                                            m.group(3), float(m.group(4)))
step = re.search(r"token slices \(a prediction[^)]*\): .*?predicted step "
                 r"([\d.]+) ms", remark)
written = re.search(r"rp-compile: .*? in stages (\S+) ", remark)
checks = [
    ("stages differ", chosen != unsliced),
    ("predicted step lower", chosen_ms < unsliced_ms),
    ("the step remark is the chosen stages'",
     bool(step) and float(step.group(1)) == chosen_ms),
    ("the plan has them", bool(written) and written.group(1) == chosen),
]
if len(sys.argv) > 3:
    sims = []
    for path in sys.argv[2:4]:
        out = dict(l.split() for l in open(path) if len(l.split()) == 2)
        sims.append(float(out["step_ms"]))
    checks.append(("faster on the sim", sims[0] < sims[1]))
ok = True
for what, holds in checks:
    print(f"{what}: {holds}")
    ok &= holds
sys.exit(0 if ok else 1)
