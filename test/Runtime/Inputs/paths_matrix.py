"""Every writer and reader of every tool against special files and paths.

Usage: paths_matrix.py MODEL.onnx OUT_DIR

Writers (rp-import/rp-compile/rp-opt/rp-translate -o, rp-run --dump-outputs,
--dump-grads, --trace, --profile, --metrics, --save) get each target kind:
a FIFO, a character device (a node of /dev/zero's numbers), a folder, a
link to a file, a link to a FIFO, a dangling link, a path in a missing
folder, a path ending in '/', '.', a new file beside an unrelated
`<name>.tmp`, and /dev/null. Readers (each tool's input, rp-run's plan,
--input, --labels, --init-weights, --data, --resume, --hw) get a FIFO,
/dev/zero, a folder and a link out of nowhere. The script prints one line per
case: the exit code, whether the target is as it was ("kept") or not
("CHANGED"), and the first error line with OUT_DIR written as T. Each case
runs under a timeout, so a hang shows as exit 124.
"""
import os
import stat
import subprocess
import sys

TIMEOUT = 120


def run(cmd, cwd):
    try:
        r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True,
                           timeout=TIMEOUT)
        code, err = r.returncode, r.stderr
    except subprocess.TimeoutExpired:
        code, err = 124, ""
    if code == 0:
        return code, ""
    lines = [l for l in err.splitlines() if l.strip()]
    errors = [l for l in lines if "error" in l]
    return code, (errors or lines or [""])[0]


def snapshot(path):
    """What is at `path` (not following a link), to tell a replaced target."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    content = None
    if stat.S_ISREG(st.st_mode):
        content = open(path, "rb").read()
    elif stat.S_ISLNK(st.st_mode):
        content = os.readlink(path)
    return (stat.S_IFMT(st.st_mode), st.st_ino, st.st_rdev, content)


def main(model, out):
    out = os.path.abspath(out)
    work = os.path.join(out, "work")
    os.makedirs(work)
    tool = lambda name: os.path.join(os.environ["RP_BIN"], name)

    def must(cmd):
        subprocess.run(cmd, check=True, capture_output=True, cwd=work)

    must([tool("rp-compile"), model, "-o", "plan.rpplan"])
    must([tool("rp-compile"), model, "-o", "fwd.rpplan", "--forward-only"])
    must([tool("rp-import"), model, "-o", "in.mlir", "--weights", "in.bin"])
    must([tool("rp-opt"), "in.mlir", "--rp-train-pipeline=devices=1",
          "-o", "pipeline.mlir"])
    must([tool("rp-run"), "plan.rpplan", "--steps", "1", "--save", "ck"])
    with open(os.path.join(work, "tokens.u16"), "wb") as f:
        f.write(bytes(4096))

    def targets(t):
        """Makes each target kind in folder `t`; returns name -> path."""
        os.makedirs(t)
        os.mkfifo(os.path.join(t, "fifo"))
        os.mknod(os.path.join(t, "chardev"), 0o644 | stat.S_IFCHR,
                 os.makedev(1, 5))
        os.mkdir(os.path.join(t, "folder"))
        with open(os.path.join(t, "real.txt"), "w") as f:
            f.write("not rp's")
        os.symlink(os.path.join(t, "real.txt"), os.path.join(t, "link-file"))
        os.symlink(os.path.join(t, "fifo"), os.path.join(t, "link-fifo"))
        os.symlink(os.path.join(t, "nowhere"), os.path.join(t, "link-dangling"))
        os.mkdir(os.path.join(t, "beside.out.tmp"))
        with open(os.path.join(t, "beside.out.tmp", "mine"), "w") as f:
            f.write("not rp's")
        return {
            "fifo": os.path.join(t, "fifo"),
            "chardev": os.path.join(t, "chardev"),
            "folder": os.path.join(t, "folder"),
            "link-file": os.path.join(t, "link-file"),
            "link-fifo": os.path.join(t, "link-fifo"),
            "link-dangling": os.path.join(t, "link-dangling"),
            "missing-folder": os.path.join(t, "no", "such", "out"),
            "slash": os.path.join(t, "new") + "/",
            "dot": ".",
            "beside-tmp": os.path.join(t, "beside.out"),
            "dev-null": "/dev/null",
        }

    at = lambda name: os.path.join(work, name)
    run_args = [at("plan.rpplan"), "--steps", "1", "--threads", "2"]
    writers = {
        "rp-import -o": lambda p: [tool("rp-import"), model, "-o", p,
                                   "--weights", at("w.bin")],
        "rp-compile -o": lambda p: [tool("rp-compile"), model, "-o", p],
        "rp-opt -o": lambda p: [tool("rp-opt"), at("in.mlir"), "-o", p],
        "rp-translate -o": lambda p: [tool("rp-translate"), "--rp-export-plan",
                                      at("pipeline.mlir"), "-o", p],
        "rp-run --dump-outputs": lambda p: [tool("rp-run"), at("fwd.rpplan"),
                                            "--dump-outputs", p],
        "rp-run --dump-grads": lambda p: [tool("rp-run")] + run_args +
        ["--dump-grads", p],
        "rp-run --trace": lambda p: [tool("rp-run")] + run_args +
        ["--trace", p],
        "rp-run --profile": lambda p: [tool("rp-run")] + run_args +
        ["--profile", p],
        "rp-run --metrics": lambda p: [tool("rp-run")] + run_args +
        ["--metrics", p],
        "rp-run --save": lambda p: [tool("rp-run")] + run_args + ["--save", p],
    }
    for index, (writer, command) in enumerate(writers.items()):
        t = os.path.join(out, "t%d" % index)
        for kind, path in targets(t).items():
            # Never against a build that might replace /dev/null (the
            # table of the report ran the old tools with this set).
            if kind == "dev-null" and os.environ.get("RP_MATRIX_NO_DEV_NULL"):
                continue
            # rp-run writes '.' as itself: the case is --save ., the others
            # would write the file '.', which is the folder.
            cwd = t if kind == "dot" else work
            watched = [os.path.join(cwd, path.rstrip("/") or "/"),
                       os.path.join(t, "real.txt"), os.path.join(t, "fifo"),
                       os.path.join(t, "beside.out.tmp", "mine"), "/dev/null"]
            before = [snapshot(p) for p in watched]
            code, message = run(command(path), cwd)
            after = [snapshot(p) for p in watched]
            # A new file where nothing was is what a successful write makes.
            changed = [b != a for b, a in zip(before, after)]
            if code == 0 and before[0] is None:
                changed[0] = False
            if code == 0 and kind == "beside-tmp":
                changed[0] = False
            # --save fills an empty folder, and makes missing parents.
            if code == 0 and writer == "rp-run --save" and kind == "folder":
                changed[0] = False
            print("%s %s: exit %d, %s%s" % (
                writer, kind, code, "CHANGED" if any(changed) else "kept",
                (": " + message.replace(out, "T")) if message else ""))

    readers = {
        "rp-import": lambda p: [tool("rp-import"), p, "-o", "x.mlir",
                                "--weights", "x.bin"],
        "rp-compile": lambda p: [tool("rp-compile"), p, "-o", "x.rpplan"],
        "rp-opt": lambda p: [tool("rp-opt"), p, "-o", "x.mlir"],
        "rp-translate": lambda p: [tool("rp-translate"), "--rp-export-plan", p,
                                   "-o", "x.rpplan"],
        "rp-run PLAN": lambda p: [tool("rp-run"), p],
        "rp-run --input": lambda p: [tool("rp-run")] + run_args +
        ["--input", "tokens=" + p],
        "rp-run --labels": lambda p: [tool("rp-run")] + run_args +
        ["--labels", p],
        "rp-run --init-weights": lambda p: [tool("rp-run")] + run_args +
        ["--init-weights", p],
        "rp-run --data": lambda p: [tool("rp-run")] + run_args + ["--data", p],
        "rp-run --resume": lambda p: [tool("rp-run")] + run_args +
        ["--resume", p],
        "rp-run --hw": lambda p: [tool("rp-run"), at("plan.rpplan"), "--backend",
                                  "sim", "--hw", p],
    }
    r = os.path.join(out, "readers")
    os.makedirs(r)
    os.mkfifo(os.path.join(r, "fifo"))
    os.mkdir(os.path.join(r, "folder"))
    sources = {"fifo": os.path.join(r, "fifo"), "dev-zero": "/dev/zero",
               "folder": os.path.join(r, "folder")}
    for reader, command in readers.items():
        for kind, path in sources.items():
            code, message = run(command(path), work)
            print("%s %s: exit %d%s" % (
                reader, kind, code,
                (": " + message.replace(out, "T")) if message else ""))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
