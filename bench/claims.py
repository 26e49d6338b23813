"""What bench/paper.py needs to print a claim with its range (issue 32).

- host_variants(base): the rtx4090 profile (or its as-built form) with the
  inputs a user cannot see from the card at their two ends and in the
  middle, as the profile's own "unknown" field gives them (the one list
  rp-compile and rp-run --backend sim print their ranges over,
  contract/include/rp/timing/Assumptions.h): for rtx4090 host DRAM
  100 / 200 / 300 GB/s, 4 / 1 / 1 GPUs behind one PCIe 4.0 x16 uplink
  (25 GB/s), the optimizer at 30 / 58 / 100 GB/s (58:
  bench/adamw_vs_torch.py on the development machine), a CUDA launch
  8 / 4 / 2 us and a hand-off 60 / 30 / 10 us (no GPU has measured
  them). Every term only slows a run as it gets worse, so the low end is
  the slowest.
- kernel_ideal(model): RoundPipe's simulator on its measured kernel times
  (bench/roundpipe_sim.py's inputs): 8 GPUs busy but for its async bubble,
  each at 4 x 2048 tokens per sum of a microbatch's layer times (forward,
  recompute, backward; the LM head's forward and backward). It has no
  host: what a kernel-only model predicts, never a win.
- measured_times(model, path, speed): those kernel times as a measured
  profile (docs/hardware-profiles.md), for rp-compile and the sim, each
  divided by `speed` (the model of RoundPipe's fast end: its runs' kernel
  speed, bench/paper_roundpipe.kernel_speed), its backward times marked as
  holding the gradient adds (backward_includes_accumulation).
- claim(low, high, published, ideal_kernels, basis): the claim printed
  beside a range, "ahead" only where its low end beats the published
  figure, and then with what it rests on.
- roundpipe_host(base, end, model): the host of the model of RoundPipe
  (the sim times it; bench/paper.py's roundpipe_model): one Python
  interpreter for every GPU's dispatch work (host_interpreters 1: its
  device threads share the GIL), the 235B's pageable weights (PAGEABLE),
  and for the MoE models its expert loop's host work per routing
  (moe_host_us, one expert's at the fast end, the whole loop's at the
  slow end).
"""

import json
import os
import sys
import textwrap
from pathlib import Path

from roundpipe_sim import MODELS

SIM_NAME = {"qwen3-1.7b": "1.7b", "llama-3.1-8b": "8b", "qwen3-32b": "32b",
            "gpt-oss-20b": "20b", "qwen3-235b-a22b": "235b"}
TOKENS = 4 * 2048  # the microbatch RoundPipe's per-layer times are for

ROOT = Path(__file__).resolve().parents[1]
# The fields a profile's "unknown" ranges may name whose larger value is
# slower (the others are rates), as Assumptions.cpp reads them.
COSTS = ("gpus_per_link", "launch_us", "job_us", "moe_host_us")
LABELS = {"host_dram_gbps": "host DRAM {} GB/s",
          "gpus_per_link": "{} GPU(s) per uplink",
          "uplink_gbps": "uplinks of {} GB/s",
          "optimizer_gbps": "optimizer {} GB/s",
          "launch_us": "launch {} us", "job_us": "hand-off {} us",
          "pageable_gbps": "pageable {} GB/s", "h2d_gbps": "uploads {} GB/s",
          "d2h_gbps": "downloads {} GB/s",
          "moe_host_us": "MoE host work {} us"}


def host_ends(base):
    """[(label, {field: value})] for the slow end ("low"), the profile as
    it is ("mid") and the fast end ("high") of its "unknown" ranges."""
    unknown = base.get("unknown", {})
    ends = []
    for label in ("low", "mid", "high"):
        fields = {}
        for field, (lo, hi) in unknown.items():
            if label == "mid":
                fields[field] = base[field]
            else:
                fields[field] = (hi if (label == "low") == (field in COSTS)
                                 else lo)
        ends.append((label, fields))
    return ends


def host_variants(base, tmp, tag):
    """Writes the three host variants of profile JSON `base` (each with
    its unknown inputs set, so the sim times it once); returns
    [(label, path)]."""
    out = []
    for label, fields in host_ends(base):
        p = json.loads(json.dumps(base))
        p.pop("unknown", None)
        p["name"] = f"{p['name']}-{label}"
        p.update(fields)
        path = Path(tmp) / f"{tag}.{label}.json"
        path.write_text(json.dumps(p))
        out.append((label, path))
    return out


def assumptions(base=None):
    base = base or json.loads((ROOT / "profiles/rtx4090.json").read_text())
    return "; ".join(
        f"{label}: " + ", ".join(LABELS[k].format(f"{v:g}")
                                 for k, v in fields.items())
        for label, fields in host_ends(base))


def microbatch_ms(model):
    layers, fwd, bwd, hfwd, hbwd = MODELS[SIM_NAME[model]][:5]
    return layers * (2 * fwd + bwd) + hfwd + hbwd


def kernel_ideal(model, gpus=8):
    async_bubble = MODELS[SIM_NAME[model]][9]
    return gpus * (1 - async_bubble / 100) * TOKENS / (
        microbatch_ms(model) / 1e3)


def one_gpu_kernels(model):
    """RoundPipe's 1-GPU tokens/s if only its kernels took time."""
    return TOKENS / (microbatch_ms(model) / 1e3)


def measured_times(model, path, speed=1.0):
    """RoundPipe's kernel times for `model` as a measured profile at
    `path`, each divided by `speed` (bench/paper_roundpipe.kernel_speed:
    its runs' kernels against its published layer times). Written whole
    under a temporary name, then renamed: paper.py's threads share it."""
    layers, fwd, bwd, hfwd, hbwd = MODELS[SIM_NAME[model]][:5]
    times = [{"name": "embed", "forward_ms": 0, "backward_ms": 0}]
    times += [{"name": f"layers.{i}", "forward_ms": fwd / speed,
               "backward_ms": bwd / speed} for i in range(layers)]
    times.append({"name": "head", "forward_ms": hfwd / speed,
                  "backward_ms": hbwd / speed})
    path = Path(path)
    staged = path.with_name(f".{path.name}.{os.getpid()}.{id(times)}")
    # Its timer brackets torch.autograd.backward, whose AccumulateGrad
    # nodes add each microbatch's weight gradients into the GPU copy's
    # .grad (roundpipe/run.py, run_backward; reference/roundpipe.md §2.2):
    # the plan's add-grads programs are in these times already.
    staged.write_text(json.dumps({"backward_includes_accumulation": True,
                                  "layers": times}))
    os.replace(staged, path)
    return path


def verdict(low, high, published, ideal_kernels=False):
    """"ahead" only where the whole range is, and never for a model of
    kernels rp does not run yet (`ideal_kernels`: the library profile)."""
    if low > published:
        return "would be ahead (kernels rp lacks)" if ideal_kernels else "ahead"
    if high < published:
        return "behind"
    return "level (the range spans it)"


def claim(low, high, published, ideal_kernels=False, basis=""):
    """The claim bench/paper.py prints for a row: verdict(), and where it
    says "ahead", what that rests on (`basis`: the assumptions at the
    range's low end, which must beat `published`). Refuses an "ahead"
    without its basis, so that no table can print one bare."""
    said = verdict(low, high, published, ideal_kernels)
    if "ahead" not in said:
        return said
    if not basis:
        raise ValueError(f"'{said}' at {low:.0f} > {published} needs what "
                         "it rests on")
    return f"{said}: rests on {basis}"


def ideal_scaling(model, gpus=8):
    """The kernel-only ideal's 1 -> `gpus` scaling: its busy share."""
    return gpus * (1 - MODELS[SIM_NAME[model]][9] / 100)


# The host's time in RoundPipe's MoE expert loop per MoE layer and routing,
# us: (one expert's, the whole loop's mean over the forward, recompute and
# backward), bench/moe_host.py (PyTorch eager on this machine's CPU, 2
# cores shared; CUDA launches not included).
MOE_HOST_US = {"gpt-oss-20b": (25.0, 801), "qwen3-235b-a22b": (125.2, 16031)}
# The runs whose weights RoundPipe kept pageable: its LoRA script passes
# pin_model="off" (artifact roundpipe/train_lora.py); its train.py, which
# ran GPT-OSS-20B and the dense models, leaves the default, "alloc"
# (pinned: reference/roundpipe.md §2.4).
PAGEABLE = ("qwen3-235b-a22b",)


# RoundPipe's host work per dense decoder layer and microbatch, us: its
# forward, recompute and backward in PyTorch eager (Python, the dispatcher,
# autograd: bench/layer_host.py, transformers' layers at negligible sizes
# on this machine's CPU, backward counted whole; CUDA's own launch cost not
# included), (at load about 3: issue 32's session 18, 175 + 203 + 375 /
# 152 + 175 + 329 / 190 + 214 + 450; at load about 3.3 with six other
# builds: session 19, 294 + 376 + 533 / 241 + 275 + 428 / 404 + 472 + 695).
# The MoE models' layers without their expert block (its sort-by-expert
# loop is MOE_HOST_US's): attention (the 20B's with sinks, eager), norms,
# residuals, the 235B's attention LoRA; the least and the most of seven
# runs at load 5 - 6 (issue 32's session 20: 20B 1,105 - 1,489, 235B
# 1,364 - 1,912 us, where the same runs put the 1.7B's at 1,267 - 1,988,
# so these ends are about 1.7x the dense rows' load-3 basis: slow ones).
# The model of RoundPipe spreads it over rp's kernel launches per layer as
# the cuda device makes them (kernel_host_us; paper_roundpipe.launches),
# beside the kernels, on its one interpreter: the second at the slow end,
# the first elsewhere.
LAYER_HOST_US = {"qwen3-1.7b": (753, 1203), "llama-3.1-8b": (656, 944),
                 "qwen3-32b": (854, 1571), "gpt-oss-20b": (1105, 1489),
                 "qwen3-235b-a22b": (1364, 1912)}


def roundpipe_host(fields, end, model, kernel_host_us=0):
    """The profile fields of the model of RoundPipe at host end `end`
    ("low", "mid", "high", or "mid-whole": mid with the whole loop) for
    `model`, on top of rp's host at that end (`fields`, host_ends'): one
    interpreter for every GPU's dispatch work, each kernel's issue work
    (`kernel_host_us`, where given) on it beside the kernels; for the MoE
    models pageable weights and the expert loop's host work per routing,
    the whole loop's at the slow end, one expert's at the fast one and at
    mid."""
    out = dict(fields, host_interpreters=1)
    if kernel_host_us:
        out["kernel_host_us"] = kernel_host_us
    if model in PAGEABLE:
        out["pinned"] = False
    if model in MOE_HOST_US:
        one, whole = MOE_HOST_US[model]
        out["moe_host_us"] = whole if end in ("low", "mid-whole") else one
    return out


# What an "ahead" rests on beyond the host's low end (claim()): rp's host
# model, which no GPU run has checked.
AHEAD_BASIS = ("rp's host model (no host loop over experts: grouped kernels "
               "with the counts on the device; a CUDA launch and hand-off no "
               "GPU run has measured) at the slow end of its range, ")


def range_lines(sim_out, sim_err, published, model, label, batch):
    """scripts/demo.sh's closing lines for a sim run's output (`sim_out`:
    rp-run --backend sim's stdout, which has tokens_per_s and its _low /
    _high ends over the profile's unknowns; `sim_err`: its stderr, which
    says what the prediction assumes and leaves out): the range, its
    assumptions, RoundPipe's `published` figure at `batch` sequences a
    step, the kernel-only ideal of `model` and the claim, "ahead" only
    where the whole range is (claim()). Raises ValueError where the run
    printed no range."""
    t = {}
    for line in sim_out.splitlines():
        parts = line.split()
        if len(parts) == 2:
            try:
                t[parts[0]] = float(parts[1])
            except ValueError:
                pass
    missing = [k for k in ("tokens_per_s_low", "tokens_per_s",
                           "tokens_per_s_high") if k not in t]
    if missing:
        raise ValueError("the sim printed no " + ", ".join(missing) +
                         ": it gives a range only on a profile with "
                         "\"unknown\" inputs (docs/sim.md)")
    assumes = sim_err[sim_err.find("the prediction assumes"):].split(
        "\n")[0] if "the prediction assumes" in sim_err else ""
    if not assumes:
        raise ValueError("the sim's stderr says nothing of what the "
                         "prediction assumes")
    lo, mid, hi = (t[k] for k in ("tokens_per_s_low", "tokens_per_s",
                                  "tokens_per_s_high"))
    said = claim(lo, hi, published, False,
                 AHEAD_BASIS + assumptions().split("; mid")[0])
    lines = [f"tokens_per_s {lo:.0f} - {hi:.0f} (mid {mid:.0f}), {label}"]
    lines += textwrap.wrap(assumes, 96, break_on_hyphens=False)
    lines.append(f"RoundPipe publishes {published:,} tokens/s at the same "
                 f"global batch ({batch} sequences per step);")
    lines.append(f"its kernel-only ideal (its simulator on its kernel "
                 f"times) is {kernel_ideal(model):.0f}; bench/paper.py has "
                 f"the whole table")
    lines.append(f"claim: {said}")
    return ["   " + line for line in lines]


def main(argv):
    """python3 bench/claims.py SIM_STDOUT SIM_STDERR PUBLISHED MODEL BATCH
    LABEL: prints range_lines() (scripts/demo.sh's closing lines); exit 1
    with the reason on bad input."""
    if len(argv) != 7:
        print("usage: claims.py SIM_STDOUT SIM_STDERR PUBLISHED MODEL BATCH "
              "LABEL", file=sys.stderr)
        return 1
    try:
        out, err = (Path(a).read_text() for a in argv[1:3])
        if argv[4] not in SIM_NAME:
            raise ValueError(f"unknown model '{argv[4]}' (one of "
                             + ", ".join(SIM_NAME) + ")")
        lines = range_lines(out, err, int(argv[3]), argv[4], argv[6],
                            int(argv[5]))
    except (OSError, ValueError) as e:
        print(f"claims.py: error: {e}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
