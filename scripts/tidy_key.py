#!/usr/bin/env python3
"""Prints a key for clang-tidy's verdict on one source file (scripts/tidy.sh).

The key is a SHA-256 over everything the verdict depends on: clang-tidy's
version, the root .clang-tidy, the file's compile command (the checkout's
path and the object file left out, so a clone elsewhere gets the same key)
and the bytes of every file the source includes, as clang 14 (tidy's own
frontend) resolves them with that command: raw bytes, so a comment (a
NOLINT) counts. tidy.sh keeps a key only for a clean file, so a finding is
always found again.

Usage: tidy_key.py ROOT COMPILE_COMMANDS TIDY FILE; exits 1 with nothing
printed where a key cannot be made (tidy.sh then runs tidy on the file).
"""

import hashlib
import json
import shlex
import subprocess
import sys


def dropOutput(args):
    """The command's arguments without the compiler, -o X and -c FILE."""
    kept, skip = [], False
    for a in args[1:]:
        if skip:
            skip = False
            continue
        if a in ("-o", "-c"):
            skip = True
            continue
        kept.append(a)
    return kept


def main():
    root, db, tidy, source = sys.argv[1:5]
    path = f"{root}/{source}"
    entry = next((e for e in json.load(open(db)) if e["file"] == path), None)
    if entry is None:
        return 1
    args = dropOutput(shlex.split(entry["command"]))
    deps = subprocess.run(
        ["clang++-14", *args, "-M", "-MG", path],
        cwd=entry["directory"], capture_output=True, text=True)
    if deps.returncode != 0:
        return 1
    # "obj.o: a.cpp b.h \\\n c.h": every name after the colon.
    names = deps.stdout.replace("\\\n", " ").split(":", 1)[1].split()
    version = subprocess.run([tidy, "--version"], capture_output=True,
                             text=True).stdout
    h = hashlib.sha256()
    h.update(version.encode())
    h.update(open(f"{root}/.clang-tidy", "rb").read())
    h.update(" ".join(args).replace(root, "<root>").encode())
    # Sorted as named without the checkout, so the order is a clone's too.
    for shown, name in sorted({(n.replace(root, "<root>"), n) for n in names}):
        try:
            data = open(name if name.startswith("/") else
                        f"{entry['directory']}/{name}", "rb").read()
        except OSError:
            return 1  # a generated header not there yet (-MG): no key
        h.update(shown.encode() + b"\0" + data)
    print(h.hexdigest())
    return 0


if __name__ == "__main__":
    sys.exit(main())
