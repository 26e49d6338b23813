# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t | FileCheck %s

# Token slices of mixture-of-experts models (issue 35): transformers'
# Qwen3-MoE and Mixtral (tiny configs from config objects: two layers,
# four experts, top-2, four query heads over two key/value heads, 48
# tokens, traced with rp.trace). Routing is per token, so a slice routes
# its own tokens as the whole sequence does: one step of the sliced plan on
# the host gives the unsliced plan's loss and every weight gradient within
# 1e-5 of the gradient's largest magnitude, on 1 and 2 devices (the tail's
# sweep, forward jobs that keep keys and backward jobs that sum key
# gradients), in 2 even slices and in 20 + 16 + 12 tokens; 2 devices equal
# 1 bit for bit; 1 device's is PyTorch's within 1e-4; and every sliced plan
# passes plan_races.py.

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
import transformers as T
from safetensors.numpy import load_file

import rp

out = Path(sys.argv[1])
S, VOCAB = 48, 64  # no feature dimension is 48: the slices retype only it
CONFIGS = ((1, ""), (2, "fwd:2;bwd:2,2"))


def make(name):
    torch.manual_seed(0)
    common = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                  num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=S,
                  num_experts_per_tok=2)
    if name == "qwen3-moe":
        lm = T.Qwen3MoeForCausalLM(T.Qwen3MoeConfig(
            head_dim=8, num_experts=4, moe_intermediate_size=16,
            decoder_sparse_step=1, norm_topk_prob=True, **common))
    else:
        lm = T.MixtralForCausalLM(T.MixtralConfig(num_local_experts=4,
                                                  **common))
    lm.eval()

    class LogitsOnly(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lm = lm

        def forward(self, input_ids):
            return self.lm(input_ids=input_ids,
                           attention_mask=torch.ones_like(input_ids),
                           use_cache=False, return_dict=False)[0]
    return LogitsOnly()


def step(plan, tokens, labels):
    """One step's loss and weight gradients (rp-run --dump-grads)."""
    grads = plan.with_suffix(".grads.safetensors")
    loss = list(rp.train(plan, {"input_ids": tokens}, labels, steps=1,
                         sync=True, dump_grads=str(grads)))[0]
    return loss, load_file(str(grads))


def worst(grads, ref):
    """The largest difference of any gradient, relative to the largest
    magnitude of the reference's."""
    assert sorted(grads) == sorted(ref), (sorted(grads), sorted(ref))
    return max(np.abs(grads[k].astype(np.float64) - ref[k]).max()
               / max(np.abs(ref[k]).max(), 1e-30) for k in ref)


RACES = Path(__file__).resolve().parents[1] / "Target/Inputs/plan_races.py"


def no_races(plan):
    desc = plan.with_suffix(".json")
    desc.write_text(rp.run_tool("rp-run", [str(plan), "--describe=json"])
                    .stdout)
    return subprocess.run([sys.executable, str(RACES), str(desc)],
                          capture_output=True).returncode == 0


def moe_calls(plan):
    """The plan's routing calls (the experts run as MoE kernels, not as a
    dense layer)."""
    desc = json.loads(rp.run_tool("rp-run", [str(plan), "--describe=json"])
                      .stdout)
    return sum(c["op"] == "moe_route" for p in desc["programs"]
               for c in p["calls"])


def bitwise(a, b):
    return all(np.array_equal(a[k], b[k]) for k in b)


for name in ("qwen3-moe", "mixtral"):
    model = make(name)
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, VOCAB, (1, S), generator=g)
    labels = torch.randint(0, VOCAB, (1, S), generator=g)
    logits = model(tokens)
    ref = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB),
                                            labels.reshape(-1))
    ref.backward()
    ref_grads = {n: p.grad.double().numpy()
                 for n, p in model.named_parameters() if p.grad is not None}
    src = rp.trace(model, (tokens,), out / f"{name}-trace")
    first = {}
    for devices, stages in CONFIGS:
        flags = ["--stages", stages] if stages else []
        plain = rp.compile(src, out / f"{name}-{devices}.rpplan",
                           devices=devices, microbatches=1, extra_args=flags)
        loss, grads = step(plain, tokens.numpy(), labels.numpy())
        for slices in ("2", "20,16,12"):
            plan = rp.compile(src, out / f"{name}-{devices}-{slices}.rpplan",
                              devices=devices, microbatches=1,
                              extra_args=flags + ["--token-slices", slices])
            sl, sg = step(plan, tokens.numpy(), labels.numpy())
            line = (f"{name} {devices} devices, slices {slices}: loss within "
                    f"1e-5 {abs(sl - loss) <= 1e-5 * abs(loss)}, "
                    f"{len(sg)} gradients within 1e-5 "
                    f"{worst(sg, grads) <= 1e-5}, reordered "
                    f"{not bitwise(sg, grads)}, no races {no_races(plan)}")
            if devices == 1:
                first[slices] = sg
                line += f", routes {moe_calls(plan) > 0}"
                line += (f", PyTorch's within 1e-4 "
                         f"{abs(sl - ref.item()) <= 1e-4 * abs(ref.item())} "
                         f"{worst(sg, ref_grads) <= 1e-4}")
            else:
                line += f", bitwise 1 device's {bitwise(sg, first[slices])}"
            print(line, flush=True)

# CHECK: qwen3-moe 1 devices, slices 2: loss within 1e-5 True, 25 gradients within 1e-5 True, reordered True, no races True, routes True, PyTorch's within 1e-4 True True
# CHECK: qwen3-moe 1 devices, slices 20,16,12: loss within 1e-5 True, 25 gradients within 1e-5 True, reordered True, no races True, routes True, PyTorch's within 1e-4 True True
# CHECK: qwen3-moe 2 devices, slices 2: loss within 1e-5 True, 25 gradients within 1e-5 True, reordered True, no races True, bitwise 1 device's True
# CHECK: qwen3-moe 2 devices, slices 20,16,12: loss within 1e-5 True, 25 gradients within 1e-5 True, reordered True, no races True, bitwise 1 device's True
# CHECK: mixtral 1 devices, slices 2: loss within 1e-5 True, 21 gradients within 1e-5 True, reordered True, no races True, routes True, PyTorch's within 1e-4 True True
# CHECK: mixtral 1 devices, slices 20,16,12: loss within 1e-5 True, 21 gradients within 1e-5 True, reordered True, no races True, routes True, PyTorch's within 1e-4 True True
# CHECK: mixtral 2 devices, slices 2: loss within 1e-5 True, 21 gradients within 1e-5 True, reordered True, no races True, bitwise 1 device's True
# CHECK: mixtral 2 devices, slices 20,16,12: loss within 1e-5 True, 21 gradients within 1e-5 True, reordered True, no races True, bitwise 1 device's True
