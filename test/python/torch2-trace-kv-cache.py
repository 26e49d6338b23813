# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t | FileCheck %s

# A new user's first try: rp.trace of a transformers model as loaded, its
# KV cache on. The model returns a DynamicCache beside its logits, which
# make_fx refused with "argument of type: <class '...DynamicCache'>"; the
# tracer now says what it is and how to leave it out. With use_cache off
# the model as loaded traces, compiles with the cross-entropy loss and
# trains.

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent / "Inputs"))
from finetune_check import make_model  # noqa: E402

import rp  # noqa: E402
from rp._irtext import TraceError  # noqa: E402
from rp.driver import train_steps  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

out = Path(sys.argv[1])
model = AutoModelForCausalLM.from_pretrained(str(make_model(out / "tiny")))
ids = torch.zeros(2, 16, dtype=torch.int64)
try:
    rp.trace(model, (ids,), out / "cached")
    print("traced with the cache")
except TraceError as e:
    # CHECK: rp.trace: LlamaForCausalLM returns a DynamicCache (its KV cache, for generation) beside its tensors; rp traces tensors only; trace it with the cache off: model.config.use_cache = False
    print(e)

model.config.use_cache = False
src = rp.trace(model, (ids,), out / "plain")
plan = rp.compile(src, out / "model.rpplan")
(_, loss), = train_steps(plan, steps=1, lr=0.0, sync=True)
# CHECK: cache off: traced, compiled, trained: True
print(f"cache off: traced, compiled, trained: {loss > 0}")
