#!/usr/bin/env python3
"""Checks that every repository path the docs name exists.

Usage: check-doc-paths.py REPO_ROOT [FILE.md ...]

With no files it reads README.md, docs/*.md, runtime/README.md,
bench/README.md and the ODS files (include/**/*.td: their descriptions are
the op and pass reference `ninja -C build mlir-doc` writes). A doc names a path in backquotes (`lib/Foo.cpp`), in a
Markdown link target ([x](docs/foo.md)) or bare in prose when it starts with
a top-level folder and a slash (lib/Foo.cpp). Fenced code blocks are not
read: they hold commands and drawings. A token counts as a repository path
when, after its `:LINE` suffix and trailing punctuation are cut:
  - it has a `/` and its first part is a top-level folder of the repository
    (lib/, docs/, runtime/, ...), or
  - it ends in a source or doc extension (.cpp .h .md .py .td ...) and has a
    `/` (a bare file name such as `Plan.cpp` says no folder, so it is not
    checked).
Paths are read from the repository root (an #include spelling `rp/...`
from include/, contract/include/ or runtime/include/); a link target is
also tried beside the doc that holds it (Markdown links are relative to
their file). A token
that climbs out of the repository (`../shared/...`) is an error: a
clone does not have it.

Not checked, because they name no one file:
  - globs and placeholders: `*`, `?`, `<`, `>`, `{`, `}`, `$`, `%`, `...`,
    or an all-capitals part such as NAME or MODEL (`docs/NAME.md`);
  - outputs a command writes: paths under out/, out_dir/, build*/,
    demo-out/, results/ or bench/results/;
  - URLs (anything with `://`) and tokens with spaces (commands).
It prints each bad path as FILE:LINE: PATH and exits 1 when there is one.
"""

import glob
import os
import re
import sys

EXTENSIONS = (".cpp", ".h", ".hpp", ".cu", ".cuh", ".c", ".td", ".py", ".md",
              ".txt", ".cfg", ".fbs", ".json", ".sh", ".mlir", ".onnxtext",
              ".test", ".toml", ".yaml", ".yml", ".in", ".cmake")
# Folders a build or a run makes (rp.trace's out_dir, scripts/demo.sh's
# demo-out/, bench's results/): a path under them is an output.
OUTPUT_TOPS = {"out", "out_dir", "build", "demo-out", "results"}
OUTPUT_PREFIXES = ("bench/results/",)
# `rp/...` is an #include spelling, read from the include folders.
INCLUDE_DIRS = ("include", "contract/include", "runtime/include")
BACKQUOTED = re.compile(r"`([^`\n]+)`")
LINKED = re.compile(r"\]\(([^)\s]+)\)")
PLACEHOLDER = re.compile(r"[*?<>{}$%]|\.\.\.|(^|/)[A-Z][A-Z0-9_]+(\.|/|$)")
FENCE = re.compile(r"^\s*```")


def default_docs(root):
    docs = ["README.md", "runtime/README.md", "bench/README.md"]
    docs += sorted(os.path.relpath(p, root)
                   for p in glob.glob(os.path.join(root, "docs", "*.md")))
    docs += sorted(os.path.relpath(p, root) for p in glob.glob(
        os.path.join(root, "include", "**", "*.td"), recursive=True))
    return docs


def clean(token):
    token = token.strip()
    token = re.sub(r"#.*$", "", token)        # link anchor
    token = re.sub(r"(:\d+)+(-\d+)?$", "", token)  # file:LINE
    token = token.rstrip(".,;:)")
    return token


def looks_like_path(token, tops):
    if " " in token or "://" in token or not token:
        return False
    if token.startswith("../") or token.startswith("./../"):
        return True
    if "/" not in token:
        return False
    first = token.lstrip("./").split("/")[0]
    return first in tops or token.endswith(EXTENSIONS)


def excluded(token):
    if PLACEHOLDER.search(token):
        return True
    first = token.lstrip("./").split("/")[0]
    return (first in OUTPUT_TOPS or first.startswith("build")
            or token.startswith(OUTPUT_PREFIXES))


def tokens_of(text, tops):
    """Yields (line number, token, is_link) outside fenced code blocks."""
    # A bare path in prose: a top-level folder (or ..), a slash, and more,
    # not inside a longer word or path.
    bare = re.compile(r"(?<![\w/.`-])((?:%s)/[\w./+-]*[\w/])"
                      % "|".join(sorted(map(re.escape, tops)) + [r"\.\."]))
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        for match in BACKQUOTED.finditer(line):
            yield number, match.group(1), False
        for match in LINKED.finditer(line):
            yield number, match.group(1), True
        prose = LINKED.sub("", BACKQUOTED.sub("", line))
        for match in bare.finditer(prose):
            yield number, match.group(1), False


def check(root, doc, tops):
    errors = []
    with open(os.path.join(root, doc), encoding="utf-8") as f:
        text = f.read()
    for number, raw, is_link in tokens_of(text, tops):
        token = clean(raw)
        if not looks_like_path(token, tops):
            continue
        where = f"{doc}:{number}: {raw}"
        if ".." in token.split("/"):
            errors.append(f"{where}: names a path outside the repository "
                          "(a clone does not have it; name it root-relative "
                          "or in words)")
            continue
        if excluded(token):
            continue
        candidates = [os.path.join(root, token)]
        if token.startswith("rp/"):
            candidates += [os.path.join(root, d, token) for d in INCLUDE_DIRS]
        if is_link:
            candidates.append(os.path.join(root, os.path.dirname(doc), token))
        if not any(os.path.exists(c) for c in candidates):
            errors.append(f"{where}: no such path in the repository")
    return errors


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = os.path.abspath(argv[1])
    docs = argv[2:] or default_docs(root)
    tops = {e for e in os.listdir(root)
            if os.path.isdir(os.path.join(root, e)) and not e.startswith(".")}
    tops -= OUTPUT_TOPS
    errors = []
    for doc in docs:
        errors += check(root, doc, tops)
    for error in errors:
        print(error)
    ods = sum(doc.endswith(".td") for doc in docs)
    print(f"{len(docs)} docs checked ({ods} ODS files), {len(errors)} bad paths")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
