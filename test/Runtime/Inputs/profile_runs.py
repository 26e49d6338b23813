"""Shared by the host-work tests (kernel_host.py, one_interpreter.py): a
hardware profile rewritten with some fields, a small dense or MoE graph
compiled for four devices with fixed stages (so the profiles change the
timing, never the plan), the sim's figures, and the plan's description."""
import json
import os
import subprocess
from pathlib import Path

BIN = Path(os.environ["RP_BIN"])


class ProfileRuns:
    def __init__(self, out, graph, profile, **always):
        self.out, self.graph = Path(out), graph
        self.profile, self.always = Path(profile), always
        self.out.mkdir(parents=True, exist_ok=True)

    def write(self, name, **fields):
        """The profile, its range of unknowns dropped, with FIELDS set."""
        p = json.loads(self.profile.read_text())
        p.pop("unknown", None)
        p.update(fields, name=name, **self.always)
        path = self.out / f"{name}.json"
        path.write_text(json.dumps(p))
        return path

    def compile_for(self, hw):
        plan = self.out / f"{hw.stem}.rpplan"
        subprocess.run([str(BIN / "rp-compile"), self.graph, "-o", str(plan),
                        "--devices", "4", "--microbatches", "4", "--hw",
                        str(hw), "--stages", "fwd:1,2;bwd:1,1,1,1"],
                       check=True, capture_output=True, text=True)
        return plan

    @staticmethod
    def sim(plan, hw, extra=()):
        """The sim's figures (key -> number) and its stderr."""
        r = subprocess.run([str(BIN / "rp-run"), str(plan), "--backend",
                            "sim", "--hw", str(hw), *extra],
                           check=True, capture_output=True, text=True)
        figures = {k: float(v) for k, v in
                   (l.split() for l in r.stdout.splitlines() if " " in l)}
        return figures, r.stderr

    @staticmethod
    def describe(plan):
        return json.loads(subprocess.run(
            [str(BIN / "rp-run"), str(plan), "--describe=json"], check=True,
            capture_output=True, text=True).stdout)
