# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t | FileCheck %s

# rp-compile --token-slices on transformers' Llama and Qwen3 (tiny configs
# from config objects: two layers, four query heads over two key/value
# heads, 48 tokens, traced with rp.trace): the compile runs the whole
# sliced path, rp-slice-tokens, the sliced schedule, its kept keys' copies,
# the memory plan and its verification, the slices' differentiation, up to
# the exporter, which refuses (docs/token-slices.md, open item 3): an error
# saying what and what to do, exit 1, no plan file. On 1, 2 and 4 devices,
# with even and uneven slices. rp-opt's --rp-train-pipeline shows what the
# compile built: per slice function the kept keys and values of each
# attention layer as arguments (slices after the first) and its own as
# results (all but the last), 2 (K - 1) of each name per layer; their
# gradients likewise (`grad:keys:L`); a download per forward of a slice but
# the last and an upload per later slice and command that reads kept keys
# (the schedule's rp.kept_keys copies): on one device the tail holds both
# attention layers, so its sweep sends slice 0 down and its fused command
# of slice 1 brings it up (1, 1); with fwd:2;bwd:2,2 the forward job and
# the tail's sweep send slice 0 down, the forward, the fused tail and the
# backward of layers.0 bring it up (2, 3); with fwd:1,1;bwd:2,1,1 and three
# slices layers.0's forward and the tail's sweep send slices 0 and 1 down
# (4), and slices 1 and 2 come up for layers.0's forward and backward and
# the fused tail, and slice 1's for the tail's sweep of it (7). One slice
# cuts nothing: the plan is the unsliced one, byte for byte.

import re
import sys
from pathlib import Path

import torch
import transformers as T

import rp
from rp.tools import ToolError

out = Path(sys.argv[1])
S, VOCAB = 48, 64  # no feature dimension is 48: the slices retype only it


def make(name):
    torch.manual_seed(0)
    common = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                  num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=S)
    lm = (T.Qwen3ForCausalLM(T.Qwen3Config(head_dim=8, **common))
          if name == "qwen3" else T.LlamaForCausalLM(T.LlamaConfig(**common)))
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


def ir_facts(src, devices, slices, stages):
    opts = f"devices={devices} microbatches=1 token-slices={slices}"
    if stages:
        opts += f" stages={stages}"
    ir = out / "sliced.mlir"
    rp.run_tool("rp-opt", [str(src), f"--rp-train-pipeline={opts}", "-o",
                           str(ir)])
    text = ir.read_text()
    funcs = len(re.findall(r"func\.func @main\.slice\d+\(", text))
    keys = sorted(set(re.findall(r'rp\.name = "keys:([^"]+)"', text)))
    per = {len(re.findall(f'rp.name = "keys:{re.escape(k)}"', text))
           for k in keys}
    grads = {len(re.findall(f'rp.name = "grad:keys:{re.escape(k)}"', text))
             for k in keys}
    down = len(re.findall(r"rp\.copy d2h activation[^\n]*rp\.kept_keys",
                          text))
    up = len(re.findall(r"rp\.copy h2d activation[^\n]*rp\.kept_keys", text))
    marked = re.search(r"rp\.token_slices = (\d+)", text)
    return (f"{funcs} slice functions, {len(keys)} layers keep keys, "
            f"{sorted(per)} of each, {sorted(grads)} gradients, "
            f"{down} down {up} up, schedule of "
            f"{marked.group(1) if marked else 'no'} slices")


for name in ("llama", "qwen3"):
    model = make(name)
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, VOCAB, (1, S), generator=g)
    src = rp.trace(model, (tokens,), out / f"{name}-trace")
    for devices, slices, stages in ((1, "2", ""), (2, "2", "fwd:2;bwd:2,2"),
                                    (4, "20,16,12", "fwd:1,1;bwd:2,1,1")):
        plan = out / f"{name}-{devices}.rpplan"
        flags = ["--token-slices", slices] + (["--stages", stages]
                                              if stages else [])
        try:
            rp.compile(src, plan, devices=devices, microbatches=1,
                       extra_args=flags)
            result = "a plan written"
        except ToolError as e:
            text = str(e)
            m = re.search(r"error: 'rp.schedule' op runs (\d+) token slices "
                          r"per sequence as microbatches \(--token-slices\): "
                          r"the exporter cannot write", text)
            others = text.count("error:") - 1
            result = (f"refused by the exporter ({m.group(1)} slices, "
                      f"{others} other errors)" if m else
                      "refused elsewhere: " + text[-400:])
        print(f"{name} {devices} devices, slices {slices}: {result}, "
              f"plan file {plan.exists()}; "
              + ir_facts(src, devices, slices, stages))
    one = rp.compile(src, out / f"{name}-one.rpplan", devices=2,
                     microbatches=1, extra_args=["--token-slices", "1"])
    plain = rp.compile(src, out / f"{name}-plain.rpplan", devices=2,
                       microbatches=1)
    print(f"{name} one slice: the unsliced plan "
          f"{one.read_bytes() == plain.read_bytes()}")

# CHECK: llama 1 devices, slices 2: refused by the exporter (2 slices, 0 other errors), plan file False; 2 slice functions, 2 layers keep keys, [2] of each, [2] gradients, 1 down 1 up, schedule of 2 slices
# CHECK: llama 2 devices, slices 2: refused by the exporter (2 slices, 0 other errors), plan file False; 2 slice functions, 2 layers keep keys, [2] of each, [2] gradients, 2 down 3 up, schedule of 2 slices
# CHECK: llama 4 devices, slices 20,16,12: refused by the exporter (3 slices, 0 other errors), plan file False; 3 slice functions, 2 layers keep keys, [4] of each, [4] gradients, 4 down 7 up, schedule of 3 slices
# CHECK: llama one slice: the unsliced plan True
# CHECK: qwen3 1 devices, slices 2: refused by the exporter (2 slices, 0 other errors), plan file False; 2 slice functions, 2 layers keep keys, [2] of each, [2] gradients, 1 down 1 up, schedule of 2 slices
# CHECK: qwen3 2 devices, slices 2: refused by the exporter (2 slices, 0 other errors), plan file False; 2 slice functions, 2 layers keep keys, [2] of each, [2] gradients, 2 down 3 up, schedule of 2 slices
# CHECK: qwen3 4 devices, slices 20,16,12: refused by the exporter (3 slices, 0 other errors), plan file False; 3 slice functions, 2 layers keep keys, [4] of each, [4] gradients, 4 down 7 up, schedule of 3 slices
# CHECK: qwen3 one slice: the unsliced plan True
