"""Option-level fuzzing of rp's command-line tools.

Usage: options_fuzz.py BIN_DIR MODELS_DIR WORK_DIR [--seconds S] [--seed N]
                       [--tools rp-compile,rp-run,rp-import]

The file fuzzers (scripts/fuzz.sh) mutate what a tool reads; this one
mutates how it is called. Each case is a working command line of one tool
(a tiny GPT model, its compiled plan) with one to three options added or
replaced, each option taken from the tool's own --help and given a value at
the edge of what it parses: empty, trailing text, signs, overflow, NaN and
infinities for numbers, and for paths a FIFO, a folder, a character device,
a dangling name, a 3 GB sparse file, an empty file. Every case must end in
exit 0 or in exit 1 with an `error:` line; a case is a finding when it

  crash          dies by a signal (or the sanitizers' exit codes);
  hang           is still running after --case-timeout seconds (120) without
                 having printed a step (a run asked for 10^18 steps is
                 busy, not hung);
  exit 2         exits with any other code;
  silent wrong   exits 0 although a numeric option was given a value no
                 parser should accept (empty, "abc", "1x", NaN, overflow),
                 or leaves a special file (the FIFO, /dev/null, /dev/zero,
                 the folder) replaced by something else;
  unclear message exits 1 without a line that starts with the tool's name
                 (every rp refusal does: "rp-run: error: ...").

Prints one line per tool, the form scripts/fuzz.sh prints for its targets:
  fuzz options-<tool>: N cases, C crash, H hang, E exit 2, W silent wrong, U unclear message
and saves each finding's command line under WORK_DIR/findings/. Exits 1 on
any finding.
"""
import argparse
import os
import random
import re
import shlex
import stat
import subprocess
import sys
import time

# Values no numeric parser may accept (exit 0 with one is silent wrong);
# past 2^64 only for integers (1e23 is a float).
BAD_NUMBERS = ["", " ", "abc", "1x", "0x", "nan", "NaN", "-nan", "1e400"]
BAD_INTEGERS = ["18446744073709551616", "99999999999999999999999", "1.5",
                "1e3"]
# Values a numeric option may accept or refuse with a message.
EDGE_NUMBERS = ["0", "1", "2", "-1", "-0", "1e-30", "3e38", "inf",
                "-inf", "4294967296", "9223372036854775807", "256", "1025",
                "+1", "01"]
EDGE_TEXT = ["", "auto", "host", "a,b", ",", "0", "x=y", "-", "--", "\n",
             "\u00e9", "a" * 5000]
# Options a case never adds: they print and exit, or wait for a terminal.
SKIP = {"help", "help-hidden", "help-list", "help-list-hidden", "version",
        "print-all-options", "print-options", "list-devices", "color"}


def parse_help(binary):
    """Options of one tool as {name: kind}, kind one of flag, uint, int,
    float, text, or a list of the enum's choices."""
    out = subprocess.run([binary, "--help"], capture_output=True, text=True,
                         timeout=60).stdout
    options = {}
    lines = out.splitlines()
    for i, line in enumerate(lines):
        # CLI11: "  --steps UINT   ..." / "  --backend TEXT:{host,cuda,sim}"
        m = re.match(r"\s+(?:-\w,)?--([a-z][a-z0-9-]*)(?:\s+([A-Z]+)(?::\{([^}]*)\})?)?", line)
        if m and "=" not in line.split()[0]:
            name, kind, choices = m.groups()
            if choices:
                options[name] = choices.split(",")
            elif kind in ("UINT", "INT", "FLOAT", "TEXT"):
                options[name] = {"UINT": "uint", "INT": "int",
                                 "FLOAT": "float", "TEXT": "text"}[kind]
            else:
                options[name] = "flag"
            continue
        # LLVM cl: "  --devices=<uint>  - ..." ; an enum "--dtype=<value>"
        # followed by "    =f32  -  ..." lines.
        m = re.match(r"\s+--([a-z][a-z0-9-]*)(?:=<([a-z]+)>)?\s+- ", line)
        if m:
            name, kind = m.groups()
            if kind == "value":
                choices = []
                for follow in lines[i + 1:]:
                    c = re.match(r"\s+=([\w.-]+)\s+-", follow)
                    if not c:
                        break
                    choices.append(c.group(1))
                options[name] = choices or "text"
            elif kind in ("uint", "int", "ulong", "long"):
                options[name] = "int" if kind in ("int", "long") else "uint"
            elif kind == "number":
                options[name] = "float"
            elif kind is None:
                options[name] = "flag"
            else:
                options[name] = "text"
    return {k: v for k, v in options.items() if k not in SKIP}


class Sandbox:
    """The files a case may be pointed at, made once per run."""

    def __init__(self, work):
        self.dir = os.path.join(work, "sandbox")
        os.makedirs(self.dir, exist_ok=True)
        p = lambda name: os.path.join(self.dir, name)
        self.fifo, self.folder, self.sparse = p("fifo"), p("folder"), p("sparse.bin")
        if not os.path.exists(self.fifo):
            os.mkfifo(self.fifo)
        os.makedirs(self.folder, exist_ok=True)
        with open(self.sparse, "wb") as f:
            f.truncate(3 << 30)
        open(p("empty"), "wb").close()
        if not os.path.lexists(p("dangling")):
            os.symlink(p("nowhere"), p("dangling"))
        self.specials = {self.fifo: stat.S_ISFIFO, self.folder: stat.S_ISDIR,
                         "/dev/null": stat.S_ISCHR, "/dev/zero": stat.S_ISCHR}
        self.paths = [self.fifo, self.folder, self.sparse, p("empty"),
                      p("dangling"), p("missing/x"), "/dev/null", "/dev/zero",
                      p("out.bin"), p("out.npy"), p("ck"), "."]

    def intact(self):
        """The special files a case must never replace, still what they were."""
        bad = []
        for path, is_kind in self.specials.items():
            try:
                if not is_kind(os.lstat(path).st_mode):
                    bad.append(path)
            except FileNotFoundError:
                bad.append(path)
        return bad

    def restore(self, bad):
        for path in bad:
            if path.startswith("/dev/"):
                subprocess.run(["rm", "-f", path])
                dev = {"/dev/null": "3", "/dev/zero": "5"}[path]
                subprocess.run(["mknod", "-m", "666", path, "c", "1", dev])
            elif path == self.fifo:
                subprocess.run(["rm", "-rf", path])
                os.mkfifo(path)
            else:
                subprocess.run(["rm", "-rf", path])
                os.makedirs(path)


def value_for(rng, kind, sandbox):
    """(text, must_refuse) for one option of this kind."""
    if isinstance(kind, list):
        pick = rng.random()
        if pick < 0.6:
            return rng.choice(kind), False
        return rng.choice(EDGE_TEXT + [kind[0].upper(), kind[0] + "x"]), False
    if kind in ("uint", "int", "float"):
        if rng.random() < 0.4:
            bad = BAD_NUMBERS + (BAD_INTEGERS if kind != "float" else [])
            return rng.choice(bad), True
        return rng.choice(EDGE_NUMBERS), False
    if rng.random() < 0.7:
        return rng.choice(sandbox.paths), False
    return rng.choice(EDGE_TEXT), False


def make_case(rng, tool, options, base, sandbox):
    args, must_refuse = list(base), []
    for _ in range(rng.randint(1, 3)):
        name = rng.choice(sorted(options))
        kind = options[name]
        if kind == "flag":
            args.append("--" + name)
            continue
        value, bad = value_for(rng, kind, sandbox)
        if bad:
            must_refuse.append("--%s=%r" % (name, value))
        if tool == "rp-run" and rng.random() < 0.5:
            args += ["--" + name, value]
        else:
            args.append("--%s=%s" % (name, value))
    if rng.random() < 0.1:  # the positional replaced by a special path
        args[0] = rng.choice(sandbox.paths)
    return args, must_refuse


def run_case(binary, args, timeout, cwd):
    try:
        p = subprocess.run([binary] + args, capture_output=True, cwd=cwd,
                           timeout=timeout, stdin=subprocess.DEVNULL)
        return p.returncode, p.stdout.decode("utf-8", "replace"), \
            p.stderr.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode("utf-8", "replace")
        return None, out, (e.stderr or b"").decode("utf-8", "replace")


def classify(tool, rc, out, err, must_refuse, damaged):
    if damaged:
        return "silent wrong"
    if rc is None:
        # A run that prints steps is doing what it was asked (10^18 steps).
        return None if re.search(r"^step ", out + err, re.M) else "hang"
    if rc < 0 or rc in (134, 139) or rc >= 128:
        return "crash"
    if rc not in (0, 1):
        return "exit 2"
    if rc == 0 and must_refuse:
        return "silent wrong"
    # A refusal names the tool, then what was wrong ("rp-run: error: ...",
    # "rp-compile: --devices x: give a whole number"), or is an MLIR
    # diagnostic at a place ("model.onnx:0:0: error: ...").
    if rc == 1 and not re.search(r"^(%s: \S|\S+:\d+:\d+: error: |<unknown>:0: error: )" %
                                 re.escape(tool), err, re.M):
        return "unclear message"
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("models")
    ap.add_argument("work")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--seed", type=int, default=1)
    # A real compile can take a minute (256 devices of a tiny model: 65 s
    # on a loaded 2-core machine); a hang is twice that without a step.
    ap.add_argument("--case-timeout", type=float, default=120)
    ap.add_argument("--tools", default="rp-compile,rp-run,rp-import")
    a = ap.parse_args()
    a.work = os.path.abspath(a.work)
    os.makedirs(a.work, exist_ok=True)
    sandbox = Sandbox(a.work)
    a.bin, a.models = os.path.abspath(a.bin), os.path.abspath(a.models)
    model = os.path.join(a.models, "gpt_op17.onnx")
    plan = os.path.join(a.work, "base.rpplan")
    bins = {t: os.path.join(a.bin, t) for t in a.tools.split(",")}
    if "rp-run" in bins and not os.path.exists(plan):
        subprocess.run([os.path.join(a.bin, "rp-compile"), model, "--devices",
                        "2", "--microbatches", "2", "-o", plan], check=True,
                       capture_output=True)
    bases = {
        "rp-compile": [model, "-o", os.path.join(sandbox.dir, "p.rpplan")],
        "rp-run": [plan, "--steps", "1", "--threads", "1", "--watchdog-ms",
                   "20000"],
        "rp-import": [model, "-o", os.path.join(sandbox.dir, "m.mlir")],
    }
    findings_dir = os.path.join(a.work, "findings")
    os.makedirs(findings_dir, exist_ok=True)
    status = 0
    share = a.seconds / len(bins)
    for tool, binary in bins.items():
        options = parse_help(binary)
        rng = random.Random("%d:%s" % (a.seed, tool))
        counts = {k: 0 for k in ("crash", "hang", "exit 2", "silent wrong",
                                 "unclear message")}
        cases, end = 0, time.monotonic() + share
        while time.monotonic() < end:
            args, must_refuse = make_case(rng, tool, options, bases[tool],
                                          sandbox)
            rc, out, err = run_case(binary, args, a.case_timeout, sandbox.dir)
            damaged = sandbox.intact()
            kind = classify(tool, rc, out, err, must_refuse, damaged)
            cases += 1
            if damaged:
                sandbox.restore(damaged)
            if kind:
                counts[kind] += 1
                name = "%s-%s-%d.txt" % (tool, kind.replace(" ", "-"), cases)
                with open(os.path.join(findings_dir, name), "w") as f:
                    f.write("%s %s\nexit %s\nrefuse: %s\ndamaged: %s\n%s\n%s\n" % (
                        tool, shlex.join(args), rc, must_refuse, damaged,
                        out[-2000:], err[-2000:]))
        print("fuzz options-%s: %d cases, %d crash, %d hang, %d exit 2, "
              "%d silent wrong, %d unclear message" % (
                  tool, cases, counts["crash"], counts["hang"],
                  counts["exit 2"], counts["silent wrong"],
                  counts["unclear message"]), flush=True)
        if not cases or any(counts.values()):
            status = 1
    sys.exit(status)


if __name__ == "__main__":
    main()
