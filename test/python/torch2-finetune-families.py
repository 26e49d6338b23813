# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t 2> %t/err.txt | FileCheck %s

# rp finetune beyond Llama: a tiny Qwen3 with tied embeddings (the LM head
# is the embedding: one weight, its gradient the sum of both uses) and a
# tiny Qwen3-MoE (4 experts, top 2), each made from a config object with
# the bundled tokenizer (pad_token_id None), fine-tuned on packed SFT JSONL
# (chat, prompt/completion, text) on 2 devices, in full (export --hf:
# from_pretrained) and with LoRA (export --peft: PeftModel.from_pretrained;
# the MoE's default targets adapt the stacked experts too, which export
# --merged and --peft, as PEFT's target_parameters; its attention and
# router adapters alone export --peft): each export gives rp's eval loss at
# the same weights within 1e-5.

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "Inputs"))
from finetune_check import make_model, rel, rp_loss, torch_loss  # noqa: E402

import torch  # noqa: E402
import rp  # noqa: E402
from rp import export  # noqa: E402
from peft import PeftModel  # noqa: E402
from transformers import (AutoModelForCausalLM, AutoTokenizer,  # noqa: E402
                          GptOssConfig, GptOssForCausalLM, Qwen3Config,
                          Qwen3ForCausalLM, Qwen3MoeConfig,
                          Qwen3MoeForCausalLM)

out = Path(sys.argv[1])
tiny = make_model(out / "tiny")
tok = AutoTokenizer.from_pretrained(str(tiny))
common = dict(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2,
              num_attention_heads=2, num_key_value_heads=1, head_dim=16,
              max_position_embeddings=256, eos_token_id=tok.eos_token_id,
              bos_token_id=None, pad_token_id=None)
families = {
    "qwen3": (Qwen3ForCausalLM, Qwen3Config(intermediate_size=64,
                                            tie_word_embeddings=True, **common)),
    "qwen3-moe": (Qwen3MoeForCausalLM, Qwen3MoeConfig(
        intermediate_size=64, moe_intermediate_size=32, num_experts=4,
        num_experts_per_tok=2, decoder_sparse_step=1, norm_topk_prob=True,
        tie_word_embeddings=False, **common)),
}
for name, (cls, config) in families.items():
    folder = out / name
    torch.manual_seed(0)
    cls(config).save_pretrained(str(folder))
    tok.save_pretrained(str(folder))
    # (LoRA rank, targets, export): the MoE's default targets include the
    # stacked experts, which export merged; PEFT takes the others.
    runs = [(0, "", "--hf"), (4, "", "--peft")]
    if name == "qwen3-moe":
        runs = [(0, "", "--hf"), (4, "", "--merged"),
                (4, r"self_attn|mlp\.gate\.", "--peft")]
    for lora, targets, how in runs:
        run = out / f"{name}-{how[2:]}"
        rp.finetune(folder, out / "tiny" / "train.jsonl", run,
                    eval_data=out / "tiny" / "eval.jsonl", steps=2,
                    devices=2, microbatches=3, seq_len=32, lr=1e-2, sync=True,
                    lora_rank=lora, lora_alpha=8, lora_targets=targets)
        ours = rp_loss(run)
        base = AutoModelForCausalLM.from_pretrained(str(folder)).eval()
        # Before PeftModel adds the adapters into `base`.
        untrained = torch_loss(base, run / "eval.rpds")
        if how == "--peft":
            model = PeftModel.from_pretrained(
                base, str(export.export_peft(run, out / f"{run.name}-peft")))
        else:
            model = AutoModelForCausalLM.from_pretrained(
                str(export.export_hf(run, out / f"{run.name}-hf")))
        theirs = torch_loss(model.eval(), run / "eval.rpds")
        print(f"{name} {how}: loss within 1e-5 of "
              f"rp's: {rel(ours, theirs) <= 1e-5}, trained: "
              f"{rel(ours, untrained) > 1e-4} ({ours:.6f} vs {theirs:.6f})")
        if how == "--merged":
            # The stacked experts' adapters as PEFT's target_parameters.
            adapter = export.export_peft(run, out / "experts-peft")
            config = json.loads((adapter / "adapter_config.json").read_text())
            peft_model = PeftModel.from_pretrained(
                AutoModelForCausalLM.from_pretrained(str(folder)).eval(),
                str(adapter)).eval()
            experts = [p for p in config["target_parameters"] if "experts" in p]
            print(f"expert adapters --peft ({len(experts)} target_parameters): "
                  f"loss within 1e-5 of "
                  f"rp's: {rel(ours, torch_loss(peft_model, run / 'eval.rpds')) <= 1e-5}")
        if name == "qwen3" and not lora:
            print("tied in the export:",
                  model.lm_head.weight.data_ptr()
                  == model.model.embed_tokens.weight.data_ptr())

# GPT-OSS: attention sinks and alternating sliding windows in the packed
# rows' attention, a biased router that is no nn.Linear, experts stored
# [E, in, out] (transformers' is_transposed). LoRA's default targets adapt
# attention, router and experts; --merged adds the experts' deltas in their
# own layout and --peft gives the router as a target parameter. Before, the
# trace refused the sinks, --merged failed on the experts' shapes and
# PeftModel refused the router ("Target module GptOssTopKRouter() is not
# supported").
folder = out / "gpt-oss"
torch.manual_seed(0)
oss = GptOssForCausalLM(GptOssConfig(
    intermediate_size=48, num_local_experts=4, num_experts_per_tok=2,
    sliding_window=4, **{**common, "head_dim": 8, "num_attention_heads": 4,
                         "num_key_value_heads": 2}))
with torch.no_grad():
    for layer in oss.model.layers:
        layer.self_attn.sinks.normal_()
oss.save_pretrained(str(folder))
tok.save_pretrained(str(folder))
run = out / "gpt-oss-lora"
rp.finetune(folder, out / "tiny" / "train.jsonl", run,
            eval_data=out / "tiny" / "eval.jsonl", steps=2, devices=2,
            microbatches=3, seq_len=32, lr=1e-2, sync=True, lora_rank=4,
            lora_alpha=8)
ours = rp_loss(run)
untrained = torch_loss(AutoModelForCausalLM.from_pretrained(str(folder)).eval(),
                       run / "eval.rpds")
merged = AutoModelForCausalLM.from_pretrained(
    str(export.export_hf(run, out / "gpt-oss-merged"))).eval()
adapter = export.export_peft(run, out / "gpt-oss-peft")
targets = json.loads((adapter / "adapter_config.json").read_text())
peft_model = PeftModel.from_pretrained(
    AutoModelForCausalLM.from_pretrained(str(folder)).eval(), str(adapter))
for how, model in (("--merged", merged), ("--peft", peft_model.eval())):
    theirs = torch_loss(model, run / "eval.rpds")
    print(f"gpt-oss {how}: loss within 1e-5 of rp's: "
          f"{rel(ours, theirs) <= 1e-5}, trained: {rel(ours, untrained) > 1e-4}"
          f" ({ours:.6f} vs {theirs:.6f})")
print("gpt-oss target parameters:", sorted({p.rsplit(".", 1)[-1] if "experts"
      in p else "router.weight" for p in targets["target_parameters"]}))

# CHECK: qwen3 --hf: loss within 1e-5 of rp's: True, trained: True
# CHECK-NEXT: tied in the export: True
# CHECK-NEXT: qwen3 --peft: loss within 1e-5 of rp's: True, trained: True
# CHECK-NEXT: qwen3-moe --hf: loss within 1e-5 of rp's: True, trained: True
# CHECK-NEXT: qwen3-moe --merged: loss within 1e-5 of rp's: True, trained: True
# CHECK-NEXT: expert adapters --peft (4 target_parameters): loss within 1e-5 of rp's: True
# CHECK-NEXT: qwen3-moe --peft: loss within 1e-5 of rp's: True, trained: True
# CHECK-NEXT: gpt-oss --merged: loss within 1e-5 of rp's: True, trained: True
# CHECK-NEXT: gpt-oss --peft: loss within 1e-5 of rp's: True, trained: True
# CHECK-NEXT: gpt-oss target parameters: ['down_proj', 'gate_up_proj', 'router.weight']
