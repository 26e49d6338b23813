# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t 2> %t/err.txt | FileCheck %s

# A LoRA fine-tune step of a transformers Llama (built from a config) whose
# frozen base is stored NF4 (rp-compile --quantize-base nf4, through
# rp.compile(quantize_base=...)): the loss and every adapter's gradient
# within 1e-4 of PyTorch running the same dequantized weights (bitsandbytes'
# dequantize_4bit of rp's blobs, read from the plan's weights file; the
# adapters' update added by forward hooks, as rp-add-lora writes it), and 2
# and 4 host devices bitwise equal to 1. Then the bytes: a larger Llama's NF4
# plan uploads at most 0.3 of its bf16 plan's weight bytes per step, and
# its base in host memory shrinks as much.

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent / "Inputs"))
import bnb_reference as ref  # noqa: E402
import hf_models  # noqa: E402
import tiny_gpt  # noqa: E402

import rp  # noqa: E402
from rp import safetensors as rp_safetensors  # noqa: E402
from rp.tools import find_tool  # noqa: E402

out = Path(sys.argv[1])
M, RANK, ALPHA = 2, 4, 8
model = hf_models.make("llama")
tokens, labels = tiny_gpt.batch(vocab=hf_models.VOCAB, b=M, s=16)
src = rp.trace(model, (tokens[:1],), out / "trace")


def compile_plan(tag, devices, **flags):
    return rp.compile(src, out / f"{tag}.rpplan", devices=devices,
                      microbatches=M, lora_rank=RANK, lora_alpha=ALPHA, **flags)


plan = compile_plan("nf4-1", 1, quantize_base="nf4")
print("summary:", re.search(r"(?<=; )host memory .*? per step",
                            rp.driver.last_compile_summary).group(0))
# CHECK: summary: host memory {{[0-9.]+ .iB}}: base {{[0-9.]+ .iB}}, trained weights and gradients {{[0-9.]+ .iB}}, optimizer state {{[0-9.]+ .iB}}, pinned buffers {{[0-9.]+ .iB}}, the second pass in flight {{[0-9.]+ .iB}}; weight uploads {{[0-9.]+}} MiB per step

# The quantized weights, by name, from the plan's buffers.
desc = json.loads(subprocess.run([find_tool("rp-run"), str(plan), "--describe=json"],
                                 check=True, capture_output=True, text=True).stdout)
files = [out / f["path"] for f in desc["weight_files"]]
blobs = {}
for b in desc["buffers"]:
    w = b.get("weight")
    if b.get("dtype") == "u8" and w:
        data = files[w.get("file", 0)].read_bytes()
        blobs[w["param"]] = data[w.get("offset", 0):w.get("offset", 0) + b["shape"][0]]
params = dict(model.named_parameters())
print("quantized:", len(blobs), "weights, e.g.", sorted(blobs)[0],
      "; kept whole:", sorted(n for n in params if n not in blobs and "layers" not in n))
# CHECK: quantized: 14 weights, e.g. lm.model.layers.0.mlp.down_proj.weight ; kept whole: ['lm.lm_head.weight', 'lm.model.embed_tokens.weight', 'lm.model.norm.weight']


def align4(n):
    return (n + 3) // 4 * 4


def dequantized(name):
    shape = tuple(params[name].shape)
    n = int(np.prod(shape))
    b = blobs[name]
    blocks = -(-n // 64)
    scales = align4(-(-n // 2))
    scales2 = align4(scales + blocks)
    offset = scales2 + 4 * -(-blocks // 256)
    a = np.frombuffer(b, np.uint8)
    return ref.dequantize_nf4(a[:-(-n // 2)], a[scales:scales + blocks],
                              np.frombuffer(b[scales2:offset], np.float32),
                              float(np.frombuffer(b[offset:offset + 4], np.float32)[0]),
                              shape)


# Chosen adapters (B nonzero, so that every adapter has a gradient).
g = torch.Generator().manual_seed(7)
adapters = {}
for name in blobs:
    out_f, in_f = params[name].shape
    adapters[name] = (0.2 * torch.randn(RANK, in_f, generator=g),
                      0.2 * torch.randn(out_f, RANK, generator=g))
rp_safetensors.write(out / "adapters.safetensors",
                     {**{f"{n}.lora_A": a.numpy() for n, (a, _) in adapters.items()},
                      **{f"{n}.lora_B": b.numpy() for n, (_, b) in adapters.items()}})


def rp_step(plan):
    grads = plan.with_suffix(".grads.safetensors")
    loss = list(rp.train(plan, {"input_ids": tokens}, labels, steps=1, sync=True,
                         dump_grads=grads,
                         init_weights=out / "adapters.safetensors"))[0]
    return loss, rp_safetensors.read(grads)


loss1, grads1 = rp_step(plan)

# PyTorch on the same dequantized weights, the update added by hooks.
modules = dict(model.named_modules())
leaves = {}
with torch.no_grad():
    for name in blobs:
        params[name].copy_(torch.from_numpy(dequantized(name)))
for name, (a, b) in adapters.items():
    a, b = a.clone().requires_grad_(), b.clone().requires_grad_()
    leaves[name] = (a, b)

    def hook(m, inputs, y, a=a, b=b):
        x = inputs[0]
        return y + torch.nn.functional.linear(
            (ALPHA / RANK) * torch.nn.functional.linear(x, a), b)
    modules[name[:-len(".weight")]].register_forward_hook(hook)
for p in model.parameters():
    p.requires_grad_(False)
logits = model(tokens)
ref_loss = torch.nn.functional.cross_entropy(
    logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)
ref_loss.backward()
errs = {}
for name, (a, b) in leaves.items():
    for tag, leaf in (("lora_A", a), ("lora_B", b)):
        got = grads1[f"{name}.{tag}"].astype(np.float64)
        want = leaf.grad.double().numpy()
        errs[f"{name}.{tag}"] = np.linalg.norm(got - want) / np.linalg.norm(want)
print(f"loss within 1e-4 of PyTorch: {abs(loss1 - ref_loss.item()) <= 1e-4 * abs(ref_loss.item())}; "
      f"{sum(e <= 1e-4 for e in errs.values())} of {len(errs)} adapter gradients within 1e-4; "
      f"no base gradient dumped: {not any('lora' not in n for n in grads1)}")
# CHECK: loss within 1e-4 of PyTorch: True; 28 of 28 adapter gradients within 1e-4; no base gradient dumped: True

loss2, grads2 = rp_step(compile_plan("nf4-2", 2, quantize_base="nf4"))
print("2 devices bitwise 1:", loss2 == loss1 and sorted(grads2) == sorted(grads1)
      and all(np.array_equal(grads2[n], grads1[n]) for n in grads1))
# CHECK: 2 devices bitwise 1: True
loss4, grads4 = rp_step(compile_plan("nf4-4", 4, quantize_base="nf4"))
print("4 devices bitwise 1:", loss4 == loss1 and sorted(grads4) == sorted(grads1)
      and all(np.array_equal(grads4[n], grads1[n]) for n in grads1))
# CHECK: 4 devices bitwise 1: True

# The bytes, on a Llama whose base outweighs its embeddings and adapters.
big = hf_models.tiny_gpt.make_distinct(hf_models.LogitsOnly(hf_models.T.LlamaForCausalLM(
    hf_models.T.LlamaConfig(vocab_size=64, hidden_size=512, intermediate_size=1024,
                            num_hidden_layers=2, num_attention_heads=4,
                            num_key_value_heads=2, max_position_embeddings=64))).eval())
big_src = rp.trace(big, (tokens[:1],), out / "big")


def figures(tag, **flags):
    rp.compile(big_src, out / f"big-{tag}.rpplan", devices=2, microbatches=M,
               lora_rank=RANK, dtype="bf16", **flags)
    s = rp.driver.last_compile_summary
    uploads = float(re.search(r"weight uploads ([0-9.]+) MiB per step", s).group(1))
    value, unit = re.search(r"base ([0-9.]+) (GiB|MiB|KiB)", s).groups()
    base = float(value) * {"GiB": 1 << 30, "MiB": 1 << 20, "KiB": 1 << 10}[unit]
    return uploads, base


up16, base16 = figures("bf16")
up4, base4 = figures("nf4", quantize_base="nf4")
up8, base8 = figures("int8", quantize_base="int8")
print(f"uploads per step: nf4 / bf16 <= 0.3: {up4 <= 0.3 * up16}; "
      f"int8 / bf16 <= 0.6: {up8 <= 0.6 * up16}; base nf4 < int8 < bf16: "
      f"{base4 < base8 < base16}")
print(f"nf4 {up4:.3f} MiB, int8 {up8:.3f} MiB, bf16 {up16:.3f} MiB", file=sys.stderr)
# CHECK: uploads per step: nf4 / bf16 <= 0.3: True; int8 / bf16 <= 0.6: True; base nf4 < int8 < bf16: True
