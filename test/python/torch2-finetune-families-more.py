# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t 2> %t/err.txt | FileCheck %s
# RUN: FileCheck %s --check-prefix=LOG --input-file=%t/err.txt

# Families a new user brings, each made from a config object with the
# bundled tokenizer, fine-tuned with LoRA (rank 2, the default targets) on
# packed rows, exported --hf (merged) and --peft, each export's loss rp's
# within 1e-5. Each failed before:
# - GPT-2 keeps dropout 0.1 in its config: the trace refused it (rp has no
#   random ops); finetune now turns the model's dropout off and says so.
#   Its Conv1D layers keep W [in, out]: --hf merged B A untransposed
#   ("size of tensor a (96) must match ... (32)").
# - StableLM's decoder layers do not pass keywords down to attention: the
#   document ids never reached it (KeyError 'rp_segments').
# - Gemma 2 softcaps its logits (30 tanh(logits / 30)) after the tied head:
#   the default targets took the head for a hidden layer and adapted the
#   embedding's weight, which PEFT adapts as a lookup (8e-3 off, 2e-3
#   merged).

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
tok = T.AutoTokenizer.from_pretrained(str(tiny))
common = dict(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2,
              num_attention_heads=2, num_key_value_heads=1,
              intermediate_size=64, max_position_embeddings=256,
              eos_token_id=tok.eos_token_id, bos_token_id=None,
              pad_token_id=None)
families = {
    "gpt2": lambda: T.GPT2LMHeadModel(T.GPT2Config(
        vocab_size=len(tok), n_embd=32, n_layer=2, n_head=2, n_positions=256,
        eos_token_id=tok.eos_token_id, bos_token_id=tok.eos_token_id)),
    "stablelm": lambda: T.StableLmForCausalLM(T.StableLmConfig(**common)),
    "gemma2": lambda: T.Gemma2ForCausalLM(T.Gemma2Config(
        head_dim=16, sliding_window=8, **common)),
}
for name, make in families.items():
    torch.manual_seed(0)
    folder = out / name / "model"
    make().save_pretrained(str(folder))
    tok.save_pretrained(str(folder))
    run = out / name / "lora"
    rp.finetune(folder, tiny.parent / "train.jsonl", run,
                eval_data=tiny.parent / "eval.jsonl", steps=2, seq_len=32,
                batch_size=2, lr=1e-2, sync=True, lora_rank=2, lora_alpha=4)
    ours = rp_loss(run)
    adapted = safetensors.read(run / "checkpoints" / "last" /
                               "weights.safetensors")
    heads = [n for n in adapted if "embed" in n or "lm_head" in n or "wte" in n]
    merged = T.AutoModelForCausalLM.from_pretrained(
        str(export.export_hf(run, out / name / "hf"))).eval()
    peft = PeftModel.from_pretrained(
        T.AutoModelForCausalLM.from_pretrained(str(folder)),
        str(export.export_peft(run, out / name / "peft"))).eval()
    print(f"{name}: adapters {len(adapted) // 2}, on the head: {heads}; "
          f"--hf within 1e-5: {rel(torch_loss(merged, run / 'eval.rpds'), ours) <= 1e-5}, "
          f"--peft within 1e-5: {rel(torch_loss(peft, run / 'eval.rpds'), ours) <= 1e-5}")

# A model folder saved in bf16 and sharded (as most on a hub are): trained
# in f32, exported in the folder's own dtype by default (it was f32, twice
# the size), within bf16's rounding of rp's loss (measured 2e-4).
model = T.AutoModelForCausalLM.from_pretrained(str(tiny)).to(torch.bfloat16)
model.save_pretrained(str(out / "bf16" / "model"), max_shard_size="50KB")
tok.save_pretrained(str(out / "bf16" / "model"))
run = out / "bf16" / "run"
rp.finetune(out / "bf16" / "model", tiny.parent / "train.jsonl", run,
            eval_data=tiny.parent / "eval.jsonl", steps=1, seq_len=32,
            batch_size=2, sync=True)
hf = export.export_hf(run, out / "bf16" / "hf")
model = T.AutoModelForCausalLM.from_pretrained(str(hf), dtype="auto").eval()
print(f"bf16 folder, {len(list((out / 'bf16' / 'model').glob('*.safetensors')))} "
      f"shards: exported {next(model.parameters()).dtype}, within 1e-3: "
      f"{rel(torch_loss(model.float(), run / 'eval.rpds'), rp_loss(run)) <= 1e-3}")

# CHECK: gpt2: adapters 8, on the head: []; --hf within 1e-5: True, --peft within 1e-5: True
# CHECK-NEXT: stablelm: adapters 14, on the head: []; --hf within 1e-5: True, --peft within 1e-5: True
# CHECK-NEXT: gemma2: adapters 14, on the head: []; --hf within 1e-5: True, --peft within 1e-5: True
# CHECK-NEXT: bf16 folder, {{[2-9]}} shards: exported torch.bfloat16, within 1e-3: True
# LOG: rp finetune: the model's dropout is off (transformer.drop 0.1, {{.*}}): rp traces no random ops
