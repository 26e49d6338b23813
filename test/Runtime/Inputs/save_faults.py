"""Interrupts a checkpoint save at every file operation, then resumes.

Usage: save_faults.py RP-RUN PLAN OLD NEW OUT_DIR

OLD is a checkpoint after step 1 and NEW the checkpoint one more step from
OLD makes. For every file operation N of that save (FileIO.h's
RP_FAULT_INJECT), in both modes, kill:N (SIGKILL before operation N) and
fail:N (operation N fails as on a full disk), the script copies OLD to
OUT_DIR/ck, runs the step with --resume ck --save ck, and then checks that
ck is, file for file and bit for bit, OLD or NEW (never a mix, never
missing), that a failed save exited 1 with a message and a kill left the
process killed, and that resuming from ck runs. It prints one line per
mode with the operation count and how often each outcome was seen, and
exits 1 on the first violation.
"""
import filecmp
import glob
import os
import shutil
import subprocess
import sys

FILES = ["state.json", "weights.safetensors", "compute.safetensors",
         "optimizer.safetensors"]


def same(a, b):
    return all(os.path.isfile(os.path.join(a, f)) and
               filecmp.cmp(os.path.join(a, f), os.path.join(b, f),
                           shallow=False) for f in FILES)


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def main():
    rp_run, plan, old, new, out = sys.argv[1:6]
    ck = os.path.join(out, "ck")
    for mode in ("kill", "fail"):
        seen = {"old": 0, "new": 0}
        n = 0
        while True:
            n += 1
            if n > 500:
                fail("%s: the save never finished" % mode)
            # A killed save leaves its temporary folder (ck.tmp-XXXXXX).
            for leftover in [ck, ck + ".old"] + glob.glob(ck + ".tmp-*"):
                shutil.rmtree(leftover, ignore_errors=True)
            shutil.copytree(old, ck)
            env = dict(os.environ, RP_FAULT_INJECT="%s:%d" % (mode, n))
            r = subprocess.run([rp_run, plan, "--steps", "1", "--threads", "2",
                                "--resume", ck,
                                "--save", ck], env=env, capture_output=True,
                               text=True, timeout=300)
            if r.returncode == 0:
                if not same(ck, new):
                    fail("%s:%d: a finished save is not NEW" % (mode, n))
                break
            if mode == "kill" and r.returncode != -9:
                fail("kill:%d: exit %d, not killed: %s" %
                     (n, r.returncode, r.stderr))
            if mode == "fail" and (r.returncode != 1 or
                                   "RP_FAULT_INJECT" not in r.stderr):
                fail("fail:%d: exit %d, not 1 with the injected error: %s" %
                     (n, r.returncode, r.stderr))
            # The checkpoint as a resume finds it (ck, or ck.old where the
            # file system could not exchange folders).
            found = ck if os.path.isfile(os.path.join(ck, "state.json")) \
                else ck + ".old"
            if same(found, old):
                seen["old"] += 1
            elif same(found, new):
                seen["new"] += 1
            else:
                fail("%s:%d: the checkpoint is neither OLD nor NEW" % (mode, n))
            r = subprocess.run([rp_run, plan, "--steps", "1", "--resume", ck],
                               capture_output=True, text=True, timeout=300)
            if r.returncode != 0:
                fail("%s:%d: resuming failed: %s" % (mode, n, r.stderr))
        print("%s: %d file operations; interrupted saves left old %d, new %d"
              % (mode, n - 1, seen["old"], seen["new"]))


if __name__ == "__main__":
    main()
