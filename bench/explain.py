"""Where a model's predicted step goes, by simulation (issue 32): which
kernels and which host terms pace rp's round-robin plan on 8 x rtx4090,
next to RoundPipe's figures.

Usage: python3 bench/explain.py [--model gpt-oss-20b]

The plan is bench/paper.py's (RoundPipe's global batch, the same flags),
simulated async on the rtx4090 profile with the host in the middle of its
range (bench/claims.py), as built (rtx4090:as-built) and with library
kernels (rtx4090). Each term is then changed alone and the plan simulated
again:
- a kernel kind at half its rate (profile `kernels`): the step grows by
  that kind's time on the step's critical path (all of it when the
  devices are busy throughout, as round-robin keeps them);
- a host term removed (the optimizer untimed, host DRAM unlimited, no
  job_us, no launch_us): the step shrinks by what the term costs; and
  four GPUs behind each uplink (the range's low end): what sharing costs.
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import claims  # noqa: E402
import paper  # noqa: E402

# The op kinds that carry FLOPs in the five models' plans.
KINDS = ("matmul", "moe_grouped_matmul", "moe_grouped_matmul_wgrad",
         "attention", "attention_grad")
HOST_TERMS = {  # label: the profile fields that remove it
    # Untimed: at an unbounded rate it would still stream its bytes
    # through host DRAM, beside the copies.
    "optimizer": {"optimizer_gbps": 0},
    "host DRAM": {"host_dram_gbps": 0},
    "job_us": {"job_us": 0},
    "launch_us": {"launch_us": 0},
}


def rate(profile, kind):
    """The TFLOP/s a large call of `kind` runs at on `profile`."""
    impl = profile.get("kernels", {}).get(kind)
    if impl:
        return impl["tflops"]
    peak = profile["tflops"]["f16"]
    eff = profile.get("op_efficiency", {})
    curve = (eff.get(kind) or eff.get("matmul", {})).get(
        "compute", profile.get("compute_efficiency", 1))
    share = curve[-1][1] if isinstance(curve, list) else curve
    return peak * share


def step(plan, passes, profile, tmp, tag):
    path = Path(tmp) / f"{tag}.json"
    path.write_text(json.dumps(profile))
    return paper.simulate(plan, False, passes, path)


def explain(name, tmp):
    b, m, passes = paper.batching(name)
    graph = paper.graph_for(name, tmp, b)
    extra = paper.LORA.get(name, []) + paper.THROUGHPUT_FLAGS.get(name, [])
    tokens = b * m * passes * 2048
    print(f"{name}: {b} x {m} x {passes} sequences of 2048 per step, "
          f"8 x rtx4090, async, host at 'mid' ({claims.assumptions()})")
    print(f"RoundPipe: {paper.PUBLISHED[name][0]:,} tokens/s on 8 GPUs, "
          f"{paper.ONE_GPU[name]:,} on 1; kernel-only ideal "
          f"{claims.kernel_ideal(name):.0f}; its layer times (ms, forward / "
          f"backward at 4 x 2048 tokens): "
          f"{claims.MODELS[claims.SIM_NAME[name]][1]} / "
          f"{claims.MODELS[claims.SIM_NAME[name]][2]}")
    for label, hw in paper.HW.items():
        plan = Path(tmp) / f"{name}.{hw.replace(':', '-')}.rpplan"
        compiled, _, error = paper.compile_plan(graph, plan, "round-robin", m,
                                                extra, hw)
        if compiled is None:
            print(f"  {label}: does not compile: {error}")
            continue
        base = paper.profile_json(hw)
        mid = json.loads(dict(claims.host_variants(base, tmp, "x"))["mid"]
                         .read_text())
        sim = step(plan, passes, mid, tmp, "base")
        ms = sim["step_ms"]
        print(f"\n  {label} ({hw}): step {ms:.0f} ms, {tokens / ms * 1e3:.0f}"
              f" tokens/s, steady bubble {sim['steady_bubble_pct']:.1f}%, "
              f"optimizer {sim['optimizer_ms']:.0f} ms a step, host DRAM "
              f"{sim.get('host_dram_busy_pct', 0):.0f}% busy")
        print("    term                         step change   share of the step")
        for kind in KINDS:
            p = json.loads(json.dumps(mid))
            p.setdefault("kernels", {})[kind] = {
                "name": "half rate", "tflops": rate(mid, kind) / 2}
            delta = step(plan, passes, p, tmp, kind)["step_ms"] - ms
            print(f"    {kind + ' (its time)':28s} {delta:+10.0f} ms "
                  f"{delta / ms * 100:8.1f}%")
        for term, fields in HOST_TERMS.items():
            p = {**mid, **fields}
            delta = ms - step(plan, passes, p, tmp, term)["step_ms"]
            print(f"    {term + ' (what it costs)':28s} {delta:+10.0f} ms "
                  f"{delta / ms * 100:8.1f}%")
        delta = step(plan, passes, {**mid, "gpus_per_link": 4}, tmp,
                     "shared")["step_ms"] - ms
        print(f"    {'4 GPUs per uplink (adds)':28s} {delta:+10.0f} ms "
              f"{delta / ms * 100:8.1f}%")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="gpt-oss-20b")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        explain(args.model, tmp)


if __name__ == "__main__":
    main()
