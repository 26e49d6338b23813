"""Runs a command and says whether its peak memory stayed under a bound.

Usage: peak_rss.py MIB COMMAND ARGS...

Forwards the command's stdout and stderr, prints "peak below MIB MiB" or
"peak N MiB, above MIB MiB" (the child's maximum resident set), and exits
with the command's exit code.
"""
import resource
import subprocess
import sys


def main():
    bound = int(sys.argv[1])
    code = subprocess.run(sys.argv[2:]).returncode
    sys.stdout.flush()
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
    if peak < bound:
        print("peak below %d MiB" % bound)
    else:
        print("peak %d MiB, above %d MiB" % (peak, bound))
    sys.exit(code)


if __name__ == "__main__":
    main()
