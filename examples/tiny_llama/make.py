"""Makes the bundled tiny model folder and its data, offline, from a config
object: a byte-level BPE tokenizer trained on the fly with `tokenizers`
(with a chat template), a 2-layer Llama saved with save_pretrained, and
train/eval JSONL files of chat, prompt/completion and text records.

    python examples/tiny_llama/make.py OUT_DIR [--pad-token]

writes OUT_DIR/model (config.json, model.safetensors, tokenizer files),
OUT_DIR/train.jsonl and OUT_DIR/eval.jsonl. Nothing comes from a hub.
"""

import json
import random
import sys
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}")
WORDS = ["one", "two", "three", "four", "five", "six", "seven", "eight",
         "nine", "ten"]


def records(rng, n):
    """Records of one task (the number word after a number word) in the
    three forms rp.data reads: chat messages, prompt/completion, text."""
    out = []
    for i in range(n):
        a = rng.randrange(0, 9)
        question = f"What comes after {WORDS[a]}?"
        answer = f"{WORDS[a + 1]}."
        kind = i % 3
        if kind == 0:
            out.append({"messages": [{"role": "user", "content": question},
                                     {"role": "assistant", "content": answer}]})
        elif kind == 1:
            out.append({"prompt": question + " ", "completion": answer})
        else:
            out.append({"text": f"After {WORDS[a]} comes {WORDS[a + 1]}."})
    return out


def make(out: Path, pad_token: bool = False) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    rng = random.Random(0)
    train, evals = records(rng, 48), records(rng, 12)
    corpus = [json.dumps(r) for r in train] + [" ".join(WORDS) + " What comes after ?."]
    specials = ["<|end|>", "<|user|>", "<|assistant|>", "<|pad|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=300, special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|end|>",
                                   pad_token="<|pad|>" if pad_token else None)
    fast.chat_template = CHAT_TEMPLATE
    model_dir = out / "model"
    fast.save_pretrained(str(model_dir))
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(fast), hidden_size=32, intermediate_size=64,
        num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
        max_position_embeddings=256, eos_token_id=fast.eos_token_id,
        bos_token_id=None,
        pad_token_id=fast.pad_token_id if pad_token else None,
        tie_word_embeddings=False)
    LlamaForCausalLM(config).save_pretrained(str(model_dir))
    for name, rows in (("train.jsonl", train), ("eval.jsonl", evals)):
        (out / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return model_dir


if __name__ == "__main__":
    print(make(Path(sys.argv[1]), "--pad-token" in sys.argv))
