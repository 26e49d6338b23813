# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t | FileCheck %s
# RUN: FileCheck %s --check-prefix=IR --input-file=%t/qwen3.mlir
# RUN: FileCheck %s --check-prefix=IR --input-file=%t/llama.mlir
# RUN: FileCheck %s --check-prefix=IR --input-file=%t/llama-trace/model.mlir
# RUN: FileCheck %s --check-prefix=WINDOW --input-file=%t/mistral.mlir

# transformers 5's causal LMs at 16,384 tokens (tiny configs from config
# objects, one layer, one head: the host runs the attention). The
# TorchScript ONNX export (opset 17, attention_mask all ones) computes the
# causal mask from index ranges; rp-import keeps it a band and rp.attention
# gets the `causal` flag, with no 16384 x 16384 tensor anywhere in the IR
# (folded densely it would be 268M elements, which the importer refused).
# Qwen3 and Llama compile on 1 and 2 devices; one training step on the host
# (Qwen3 on one device, Llama on two) gives PyTorch's loss within 1e-4.
# rp.trace at 16k: the rotary tables (16384 x head_dim, over the 65536
# elements of an IR constant) become frozen params and the step's loss is
# PyTorch's. Mistral with a sliding window of 64 at 512 tokens: the
# TorchScript exporter writes the window into the file as a 512 x 512
# constant, so the mask AND-ed with it folds densely (under 2^26 elements),
# and rp-fuse-attention reads that constant back as `causal` with
# `window = 64`, no mask operand; the loss is PyTorch's.

import os
import sys
import warnings
from pathlib import Path

import numpy as np
import torch
import transformers as T

import rp

out = Path(sys.argv[1])
S, VOCAB = 16384, 64


def make(name, seq):
    torch.manual_seed(0)
    common = dict(vocab_size=VOCAB, hidden_size=16, intermediate_size=32,
                  num_hidden_layers=1, num_attention_heads=1,
                  num_key_value_heads=1, max_position_embeddings=seq)
    if name == "qwen3":
        lm = T.Qwen3ForCausalLM(T.Qwen3Config(head_dim=8, **common))
    elif name == "llama":
        lm = T.LlamaForCausalLM(T.LlamaConfig(**common))
    else:
        lm = T.MistralForCausalLM(T.MistralConfig(sliding_window=64,
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


def batch(seq):
    g = torch.Generator().manual_seed(1)
    return (torch.randint(0, VOCAB, (1, seq), generator=g),
            torch.randint(0, VOCAB, (1, seq), generator=g))


def torch_loss(model, tokens, labels):
    with torch.no_grad():
        logits = model(tokens)
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, VOCAB), labels.reshape(-1)).item()


def export(model, tokens, path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (tokens,), str(path),
                          input_names=["input_ids"], output_names=["logits"],
                          opset_version=17, do_constant_folding=False,
                          dynamo=False)


def step(src, name, devices, tokens, labels, ref):
    plan = rp.compile(src, out / f"{name}-{devices}.rpplan", devices=devices,
                      microbatches=1)
    loss = next(iter(rp.train(plan, {"input_ids": tokens.numpy()},
                              labels.numpy(), steps=1, sync=True)))
    err = abs(loss - ref) / abs(ref)
    return f"loss within 1e-4: {err <= 1e-4} (rp {loss:.7g}, torch {ref:.7g})"


for name, seq, train_on in (("qwen3", S, 1), ("llama", S, 2),
                            ("mistral", 512, 1)):
    model = make(name, seq)
    tokens, labels = batch(seq)
    src = out / f"{name}.onnx"
    export(model, tokens, src)
    rp.run_tool("rp-import", [str(src), "-o", str(out / f"{name}.mlir")])
    ref = torch_loss(model, tokens, labels)
    for devices in (1, 2):
        if devices == train_on:
            print(f"{name}/onnx {seq}: {devices} devices: "
                  + step(src, name, devices, tokens, labels, ref))
        else:
            rp.compile(src, out / f"{name}-{devices}.rpplan",
                       devices=devices, microbatches=1)
            print(f"{name}/onnx {seq}: {devices} devices: compiled")
    if name == "llama":
        traced = rp.trace(model, (tokens,), out / "llama-trace")
        print(f"llama/trace {seq}: 1 devices: "
              + step(traced, "llama-trace", 1, tokens, labels, ref))

# CHECK:      qwen3/onnx 16384: 1 devices: loss within 1e-4: True
# CHECK-NEXT: qwen3/onnx 16384: 2 devices: compiled
# CHECK-NEXT: llama/onnx 16384: 1 devices: compiled
# CHECK-NEXT: llama/onnx 16384: 2 devices: loss within 1e-4: True
# CHECK-NEXT: llama/trace 16384: 1 devices: loss within 1e-4: True
# CHECK-NEXT: mistral/onnx 512: 1 devices: loss within 1e-4: True

# IR-NOT: 16384x16384
# IR: rp.attention {{.*}} causal
# IR-NOT: 16384x16384

# WINDOW-NOT: mask(
# WINDOW: rp.attention {{.*}} causal {{.*}}window = 64 :
# WINDOW-NOT: mask(
