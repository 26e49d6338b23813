# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t 2> %t/err.txt | FileCheck %s

# A tied LM head adapted on purpose: a tiny Llama whose head is its
# embedding (tie_word_embeddings=True), LoRA on the attention and on the
# head through --lora-targets 'q_proj|v_proj|embed_tokens' (rp names a tied
# weight by its first module, model.embed_tokens.weight, and adapts only
# its matmul: the head, never the lookup). Before, the export named the
# adapter model.embed_tokens, which PEFT adapts as a lookup (the loss off,
# silently), and --hf merged B A into the one tied weight (the embedding
# changed too). Now --peft names the head's module (lm_head) and --hf
# unties the head (tie_word_embeddings false, lm_head.weight W + s B A,
# the embedding W): each gives rp's eval loss at the same weights within
# 1e-5, on 1 and 2 devices.

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "Inputs"))
from finetune_check import make_model, rel, rp_loss, torch_loss  # noqa: E402

import torch  # noqa: E402
import transformers as T  # noqa: E402
from peft import PeftModel  # noqa: E402

import rp  # noqa: E402
from rp import export, safetensors  # noqa: E402

out = Path(sys.argv[1])
tiny = make_model(out / "tiny")
config = T.AutoConfig.from_pretrained(str(tiny))
config.tie_word_embeddings = True
torch.manual_seed(0)
folder = out / "tied"
T.LlamaForCausalLM(config).save_pretrained(str(folder))
T.AutoTokenizer.from_pretrained(str(tiny)).save_pretrained(str(folder))

for devices in (1, 2):
    run = out / f"run{devices}"
    rp.finetune(folder, tiny.parent / "train.jsonl", run,
                eval_data=tiny.parent / "eval.jsonl", steps=2, seq_len=32,
                devices=devices, microbatches=devices + 1, lr=1e-2, sync=True,
                lora_rank=2, lora_alpha=4,
                lora_targets="q_proj|v_proj|embed_tokens")
    ours = rp_loss(run)
    adapted = sorted(n for n in safetensors.read(
        run / "checkpoints" / "last" / "weights.safetensors") if "embed" in n)
    peft_dir = export.export_peft(run, out / f"peft{devices}")
    adapter = json.loads((peft_dir / "adapter_config.json").read_text())
    peft = PeftModel.from_pretrained(
        T.AutoModelForCausalLM.from_pretrained(str(folder)), str(peft_dir)).eval()
    hf = T.AutoModelForCausalLM.from_pretrained(
        str(export.export_hf(run, out / f"hf{devices}"))).eval()
    base = T.AutoModelForCausalLM.from_pretrained(str(folder))
    print(f"{devices} device(s): rp adapts {adapted}; --peft targets "
          f"{sorted(adapter['target_modules'])}; --peft within 1e-5: "
          f"{rel(torch_loss(peft, run / 'eval.rpds'), ours) <= 1e-5}; "
          f"--hf within 1e-5: {rel(torch_loss(hf, run / 'eval.rpds'), ours) <= 1e-5}, "
          f"tied: {hf.config.tie_word_embeddings}, its embedding the base's: "
          f"{torch.equal(hf.get_input_embeddings().weight, base.get_input_embeddings().weight)}")

# An adapter on an embedding's weight that no head shares (the folder's own
# untied Llama) names no module PEFT could adapt as rp did: refused.
untied = T.AutoModelForCausalLM.from_pretrained(str(tiny))
try:
    export._tied_heads(untied, ["model.embed_tokens.weight"])
except ValueError as err:
    print("untied:", err)

# CHECK: 1 device(s): rp adapts ['model.embed_tokens.weight.lora_A', 'model.embed_tokens.weight.lora_B']; --peft targets ['lm_head', 'model.layers.0.self_attn.q_proj', {{.*}}]; --peft within 1e-5: True; --hf within 1e-5: True, tied: False, its embedding the base's: True
# CHECK: 2 device(s): rp adapts ['model.embed_tokens.weight.lora_A', 'model.embed_tokens.weight.lora_B']; --peft targets ['lm_head', {{.*}}]; --peft within 1e-5: True; --hf within 1e-5: True, tied: False, its embedding the base's: True
# CHECK: untied: the run adapted model.embed_tokens.weight, an embedding's weight that the model's LM head does not share: rp adapted a matmul reading it, which PEFT cannot express (it adapts an embedding as a lookup); leave it out of --lora-targets
