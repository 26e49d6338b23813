"""Writes corrupted variants of a good plan, one per loader check.

Usage: bad_plans.py FLATC SCHEMA GOOD.rpplan OUT_DIR

Renders the good plan as JSON with flatc, edits one field per variant and
turns it back into a binary plan with flatc (so every variant but the
truncated and mis-identified ones is well-formed FlatBuffers and reaches the
semantic checks). Weight files stay beside OUT_DIR's plans.
"""

import json
import os
import shutil
import subprocess
import sys


def main(flatc, schema, good, out):
    os.makedirs(out, exist_ok=True)
    subprocess.run([flatc, "--json", "--strict-json", "--raw-binary",
                    "--defaults-json", "-o", out, schema, "--", good],
                   check=True)
    base = os.path.splitext(os.path.basename(good))[0]
    plan = json.load(open(os.path.join(out, base + ".json")))
    for f in plan["weight_files"]:
        shutil.copy(os.path.join(os.path.dirname(good), f["path"]), out)

    data = open(good, "rb").read()
    open(os.path.join(out, "truncated.rpplan"), "wb").write(data[:len(data) // 2])
    open(os.path.join(out, "identifier.rpplan"), "wb").write(
        data[:4] + b"XXXX" + data[8:])

    def variant(name, edit):
        p = json.loads(json.dumps(plan))
        edit(p)
        path = os.path.join(out, name + ".json")
        json.dump(p, open(path, "w"))
        # flatc names the binary after the schema's file_extension.
        subprocess.run([flatc, "-b", "-o", out, schema, path], check=True)

    variant("version", lambda p: p.update(schema_version=99))
    # Not bad: a schema-5 plan (before LoRA dropout) still loads.
    variant("old-version", lambda p: p.update(schema_version=5))
    variant("pass-shift", lambda p: p.update(pass_shift=3))
    variant("passes-in-flight", lambda p: p.update(passes_in_flight=3))
    variant("buffer-index", lambda p: p["programs"][1]["calls"][0]
            .update(inputs=[100000]))
    variant("missing-weights", lambda p: p["weight_files"][0]
            .update(path="missing.weights.bin"))
    variant("short-weights", lambda p: p["weight_files"][0]
            .update(min_size=1 << 40))
    variant("job-program", lambda p: p["jobs"][0].update(program=77))
    variant("constant-size", lambda p: next(
        b for b in p["buffers"] if b.get("constant")).update(constant=[1, 2, 3]))
    variant("kernel-arity", lambda p: p["programs"][1]["calls"][0]
            .update(inputs=[]))
    variant("output-index", lambda p: p["outputs"][0].update(buffer=123456))


if __name__ == "__main__":
    main(*sys.argv[1:5])
