"""Reads rp-compile's summary (stderr) and the sim's figures (stdout) of
one plan on a profile with unknown inputs (prediction-range.test) and says
whether each range holds its prediction and whether the compiler's ends
are the sim's.

Usage: prediction_range.py COMPILE_STDERR SIM_STDOUT"""
import re
import sys

summary = open(sys.argv[1]).read()
figures = dict(line.split() for line in open(sys.argv[2]) if " " in line)
m = re.search(r"predicted step ([0-9.]+) ms .*?% bubble \(([0-9.]+) - "
              r"([0-9.]+) ms over what", summary)
step, low, high = (float(g) for g in m.groups())
print(f"compiler: low < step < high: {low < step < high} "
      f"({low} < {step} < {high})")
tps = float(figures["tokens_per_s"])
tlo = float(figures["tokens_per_s_low"])
thi = float(figures["tokens_per_s_high"])
print(f"sim: low < tokens/s < high: {tlo < tps < thi} ({tlo} < {tps} < {thi})")
slo, shi = float(figures["step_ms_low"]), float(figures["step_ms_high"])
close = abs(low / slo - 1) <= 0.01 and abs(high / shi - 1) <= 0.01
print(f"compiler and sim ends within 1%: {close} (compiler {low} - {high}, "
      f"sim {slo} - {shi} ms)")
