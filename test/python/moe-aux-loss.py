# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %PYTHON %s %t | FileCheck %s

# The Switch/Mixtral load-balancing loss through rp.trace:
# transformers' MixtralForCausalLM and Qwen2MoeForCausalLM (tiny configs, 4
# experts, top-2, output_router_logits=True, router_aux_loss_coef 0.5 so that the term
# matters) wrapped to return its logits and coef * aux_loss (Mixtral with
# an attention mask, Qwen2-MoE without: both forms), compiled with
# --loss=cross-entropy+output:output_1. rp computes the auxiliary loss per
# microbatch (transformers' load_balancing_loss_func over that
# microbatch's tokens, every layer's router logits together) and adds it
# weighted by the microbatch's label count, so the step loss is
# (sum_m CE_sum_m + sum_m count_m * coef * aux_m) / sum_m count_m. The
# reference computes exactly that with transformers' own aux_loss of each
# microbatch. On one device with 4 microbatches the step-0 loss and every
# gradient (router gates included) equal PyTorch's within 1e-4; the router
# gates' gradients differ from those without the auxiliary loss; 2 and 4
# devices in sync mode are bitwise one device. Where transformers has them
# (the torch-2 venv), Qwen3-MoE and GPT-OSS (its biased router, top-k
# before the softmax) run the same checks.

import os
import sys
from pathlib import Path

import numpy as np
import torch
import transformers as T

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import hf_models  # noqa: E402
import moe_check  # noqa: E402
import rp  # noqa: E402
import tiny_gpt  # noqa: E402

out = Path(sys.argv[1])
M = 4
VOCAB = hf_models.VOCAB
tokens, labels = tiny_gpt.batch(vocab=VOCAB, b=M, s=16)
inputs = {"input_ids": tokens}


class WithAux(torch.nn.Module):
    """The logits and the model's weighted load-balancing loss; with
    `mask`, an all-ones attention mask (the aux loss's masked form)."""

    def __init__(self, lm, mask):
        super().__init__()
        self.lm = lm
        self.mask = mask

    def forward(self, input_ids):
        mask = torch.ones_like(input_ids) if self.mask else None
        o = self.lm(input_ids=input_ids, attention_mask=mask,
                    use_cache=False, output_router_logits=True,
                    return_dict=True)
        return o.logits, self.lm.config.router_aux_loss_coef * o.aux_loss


def mixtral():
    return T.MixtralForCausalLM(T.MixtralConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=64, num_local_experts=4,
        num_experts_per_tok=2, output_router_logits=True,
        router_aux_loss_coef=0.5))


def qwen2_moe():
    return T.Qwen2MoeForCausalLM(T.Qwen2MoeConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48,
        moe_intermediate_size=24, shared_expert_intermediate_size=40,
        num_experts=4, num_experts_per_tok=2, norm_topk_prob=False,
        decoder_sparse_step=1, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64,
        output_router_logits=True, router_aux_loss_coef=0.5))


def qwen3_moe():
    # transformers >= 4.51 only (the torch-2 venv).
    return T.Qwen3MoeForCausalLM(T.Qwen3MoeConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48,
        moe_intermediate_size=24, num_experts=4, num_experts_per_tok=2,
        norm_topk_prob=True, decoder_sparse_step=1, head_dim=8,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=64, output_router_logits=True,
        router_aux_loss_coef=0.5))


def gpt_oss():
    # transformers >= 4.55 only (the torch-2 venv).
    return T.GptOssForCausalLM(T.GptOssConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48, head_dim=8,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=64, num_local_experts=4,
        num_experts_per_tok=2, sliding_window=4, swiglu_limit=0.1,
        output_router_logits=True, router_aux_loss_coef=0.5))


def reference(model, aux_weight):
    """Per microbatch: CE summed over its labels plus count * aux."""
    model.zero_grad()
    total, count = 0.0, 0
    for m in range(M):
        logits, aux = model(tokens[m:m + 1])
        lab = labels[m:m + 1].reshape(-1)
        c = int((lab != -100).sum())
        total = total + torch.nn.functional.cross_entropy(
            logits.reshape(-1, VOCAB), lab, ignore_index=-100,
            reduction="sum") + aux_weight * c * aux
        count += c
    loss = total / count
    loss.backward()
    grads = {n: p.grad.detach().double().numpy()
             for n, p in model.named_parameters()}
    model.zero_grad()
    return loss.item(), grads


def run(src, name, devices):
    return moe_check.run(src, out, name, devices, inputs, labels, M,
                         loss="cross-entropy+output:output_1")


# Qwen3-MoE and GPT-OSS need a later transformers than scripts/setup.sh's
# 4.40: they run in the torch-2 venv (torch2-moe-aux-loss.test).
MODELS = [("mixtral", mixtral, True), ("qwen2-moe", qwen2_moe, False)]
if hasattr(T, "Qwen3MoeForCausalLM"):
    MODELS.append(("qwen3-moe", qwen3_moe, True))
if hasattr(T, "GptOssForCausalLM"):
    MODELS.append(("gpt-oss", gpt_oss, True))
for name, make, mask in MODELS:
    torch.manual_seed(0)
    lm = make()
    lm.config.use_cache = False
    lm.eval()
    model = tiny_gpt.make_distinct(WithAux(lm, mask))
    ref_loss, ref_grads = reference(model, 1.0)
    _, plain_grads = reference(model, 0.0)
    # The routers: mixtral's block_sparse_moe.gate, Qwen2-MoE's and
    # Qwen3-MoE's mlp.gate, GPT-OSS's mlp.router.
    gates = [n for n in ref_grads if n.endswith("moe.gate.weight") or
             n.endswith("mlp.gate.weight") or
             n.endswith("mlp.router.weight")]
    moved = min(np.linalg.norm(ref_grads[n] - plain_grads[n]) /
                np.linalg.norm(ref_grads[n]) for n in gates)
    print(f"{name}: {len(gates)} router gates, gradients moved by the aux "
          f"loss: {moved > 1e-2}")

    mod = sys.modules[type(lm).__module__]
    before = mod.load_balancing_loss_func
    src = rp.trace(model, (tokens[:1],), out / name)
    print(f"{name}: load_balancing_loss_func restored after the trace: "
          f"{mod.load_balancing_loss_func is before}")
    text = src.read_text()
    print(f"{name}: moe ops: {text.count('rp.moe.route ')} routes "
          f"(2 layers and the aux loss's top-k)")
    one, grads = run(src, name, 1)
    loss_err = abs(float(one[0]) - ref_loss) / abs(ref_loss)
    print(f"{name}: loss within 1e-4: {loss_err <= 1e-4} "
          f"(rp {one[0]}, torch {ref_loss:.9g})")
    errs = {n: np.linalg.norm(grads[n] - g) / np.linalg.norm(g)
            for n, g in ref_grads.items() if n in grads}
    worst = max(errs, key=errs.get)
    print(f"{name}: gradients {len(errs)} of {len(ref_grads)} within 1e-4: "
          f"{all(e <= 1e-4 for e in errs.values())} "
          f"(worst {errs[worst]:.2e}, {worst})")
    print(f"{name}: router gates within 1e-4: "
          f"{all(errs[n] <= 1e-4 for n in gates)}")
    for devices in (2, 4):
        losses, g = run(src, name, devices)
        same = losses == one and sorted(g) == sorted(grads) and all(
            np.array_equal(g[n], grads[n]) for n in grads)
        print(f"{name}: {devices} devices bitwise: {same}"
              + ("" if same else f" (losses {losses} vs {one})"))

# CHECK:      mixtral: 2 router gates, gradients moved by the aux loss: True
# CHECK-NEXT: mixtral: load_balancing_loss_func restored after the trace: True
# CHECK-NEXT: mixtral: moe ops: 3 routes
# CHECK-NEXT: mixtral: loss within 1e-4: True
# CHECK-NEXT: mixtral: gradients 41 of 41 within 1e-4: True
# CHECK-NEXT: mixtral: router gates within 1e-4: True
# CHECK-NEXT: mixtral: 2 devices bitwise: True
# CHECK-NEXT: mixtral: 4 devices bitwise: True
# CHECK-NEXT: qwen2-moe: 2 router gates, gradients moved by the aux loss: True
# CHECK-NEXT: qwen2-moe: load_balancing_loss_func restored after the trace: True
# CHECK-NEXT: qwen2-moe: moe ops: 3 routes
# CHECK-NEXT: qwen2-moe: loss within 1e-4: True
# CHECK-NEXT: qwen2-moe: gradients 55 of 55 within 1e-4: True
# CHECK-NEXT: qwen2-moe: router gates within 1e-4: True
# CHECK-NEXT: qwen2-moe: 2 devices bitwise: True
# CHECK-NEXT: qwen2-moe: 4 devices bitwise: True
