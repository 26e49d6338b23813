"""Builds rp-fuzz-onnx: the ONNX importer under libFuzzer.

Usage: build_onnx_fuzzer.py BUILD OUT

The compiler is built with g++ (BUILD, the main build), but libFuzzer needs
clang's coverage instrumentation. This compiles the importer's own sources
(lib/Import/ONNX), fuzz/ONNXFuzzer.cpp and fuzz/ONNXMutator.cpp (the
structure-aware mutator) with clang++-14
(-fsanitize=fuzzer-no-link,address,undefined), with the flags BUILD's
compile_commands.json gives them, and links them against BUILD's other
libraries exactly as BUILD links rp-import. Coverage guides the fuzzer
through the importer; the dialect, passes and MLIR itself run
uninstrumented. Objects are kept in OUT and rebuilt when their source is
newer.
"""
import concurrent.futures
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

CXX = "clang++-14"
# ccache makes a fresh tree's build (CI) as quick as the main build's.
LAUNCH = ["ccache"] if shutil.which("ccache") else []
# -g1: line tables, all a report's stack needs (runtime/CMakeLists.txt).
SANITIZE = ["-fsanitize=fuzzer-no-link,address,undefined",
            "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-g1", "-O1",
            "-Wno-unknown-warning-option"]


def main(build, out):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    build = os.path.abspath(build)
    os.makedirs(out, exist_ok=True)
    commands = json.load(open(os.path.join(build, "compile_commands.json")))
    importer = [c for c in commands
                if "/lib/Import/ONNX/" in c["file"] and c["file"].endswith(".cpp")]
    if not importer:
        sys.exit("fuzz: no importer sources in %s/compile_commands.json" % build)
    # The harness compiles with the flags of the importer's sources.
    flags = [a for a in shlex.split(importer[0]["command"])[1:]
             if a.startswith(("-D", "-I", "-std"))]
    sources = [c["file"] for c in importer]
    sources.append(os.path.join(root, "fuzz", "ONNXFuzzer.cpp"))
    # The structure-aware mutator (libFuzzer finds LLVMFuzzerCustomMutator
    # by name).
    sources.append(os.path.join(root, "fuzz", "ONNXMutator.cpp"))
    objects = [os.path.join(out, os.path.basename(src) + ".o")
               for src in sources]
    stale = [(src, obj) for src, obj in zip(sources, objects)
             if not os.path.exists(obj)
             or os.path.getmtime(obj) < os.path.getmtime(src)]

    def compile_one(job):
        src, obj = job
        subprocess.run(LAUNCH + [CXX] + flags + SANITIZE +
                       ["-c", src, "-o", obj], check=True)

    # As many compiles at a time as there are cores, as ninja would run
    # them: one after another, a tree whose importer changed (every CI run
    # after an importer commit) left the other core idle.
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        for _ in pool.map(compile_one, stale):
            pass
    ninja = open(os.path.join(build, "build.ninja")).read()
    block = ninja[ninja.index("build bin/rp-import:"):]
    libs = re.search(r"\n  LINK_LIBRARIES = (.*)\n", block).group(1)
    libs = [a for a in shlex.split(libs.replace("$$", "$"))
            if "libRPImportONNX.a" not in a and not a.startswith("-Wl,-rpath,")]
    libs = [a if a.startswith(("-", "/")) else os.path.join(build, a)
            for a in libs]
    binary = os.path.join(out, "rp-fuzz-onnx")
    subprocess.run([CXX, "-fsanitize=fuzzer,address,undefined", "-o", binary]
                   + objects + libs
                   + ["-Wl,-rpath,/usr/lib/llvm-22/lib"], check=True)
    print(binary)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
