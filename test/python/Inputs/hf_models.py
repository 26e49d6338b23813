"""Tiny Hugging Face transformers causal LMs for the model tests: configs
built from config objects (nothing is downloaded; HF_HUB_OFFLINE=1), random
weights made distinct (exporters store equal initializers once, which would
tie them), and a wrapper whose forward takes the token ids and returns the
logits only, as rp's cross-entropy loss wants."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import transformers as T  # noqa: E402

import tiny_gpt  # noqa: E402

VOCAB = 64


def _llama_like(config_cls, model_cls, **extra):
    config = config_cls(vocab_size=VOCAB, hidden_size=32,
                        intermediate_size=48, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2,
                        max_position_embeddings=64, **extra)
    return model_cls(config)


def builders():
    """name -> (what it exercises, a function making the model)."""
    out = {
        "llama": ("GQA, RoPE", lambda: _llama_like(
            T.LlamaConfig, T.LlamaForCausalLM)),
        "qwen2": ("GQA, RoPE, qkv bias", lambda: _llama_like(
            T.Qwen2Config, T.Qwen2ForCausalLM)),
        "mistral": ("GQA, RoPE, sliding window 4", lambda: _llama_like(
            T.MistralConfig, T.MistralForCausalLM, sliding_window=4)),
        "gpt2": ("tied embeddings, learned positions", lambda:
                 T.GPT2LMHeadModel(T.GPT2Config(
                     vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4,
                     n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0,
                     attn_pdrop=0.0))),
    }
    if hasattr(T, "Qwen3ForCausalLM"):
        out["qwen3"] = ("GQA, RoPE, q/k norm", lambda: _llama_like(
            T.Qwen3Config, T.Qwen3ForCausalLM, head_dim=8))
    return out


class LogitsOnly(torch.nn.Module):
    """The model's logits for `input_ids`, without the cache. The all-ones
    attention mask, made from the input's shape (input-independent, so rp
    folds it), is what a user without padding passes; without it
    transformers 5 looks for packed sequences with aten::diff, which the
    TorchScript exporter cannot export."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm
        # The mask's dtype: the ids' (int64) unless set (a float mask, as
        # XLNet and ProphetNet document theirs).
        self.mask_dtype = None

    def forward(self, input_ids):
        mask = torch.ones_like(input_ids, dtype=self.mask_dtype)
        return self.lm(input_ids=input_ids, attention_mask=mask,
                       use_cache=False, return_dict=False)[0]


def make(name):
    torch.manual_seed(0)
    lm = builders()[name][1]()
    lm.config.use_cache = False
    lm.eval()  # dropout off; rp trains without dropout
    return tiny_gpt.make_distinct(LogitsOnly(lm))
