"""Runs a command, writes its stderr to a file and its peak resident set
(KiB, the child's maximum) to another, and exits with its exit code.

Usage: peak_kib.py STDERR_FILE PEAK_FILE COMMAND ARGS...
"""
import resource
import subprocess
import sys

with open(sys.argv[1], "w") as err:
    code = subprocess.run(sys.argv[3:], stderr=err).returncode
with open(sys.argv[2], "w") as out:
    out.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(code)
