"""The tiny Mixtral the MoE front-end tests share (onnx-moe.py,
trace-moe.py): transformers' MixtralForCausalLM from a config (4 experts,
top-2, distinct random weights), and the count of tokens whose routing a
top-k tie decides."""
import torch
import transformers as T

import hf_models
import tiny_gpt


def mixtral(tie=False):
    """The model as logits only. TIE gives experts 1 and 2 the same router
    row: every token scores them equal, and torch.topk takes the lower
    index first."""
    torch.manual_seed(0)
    lm = T.MixtralForCausalLM(T.MixtralConfig(
        vocab_size=hf_models.VOCAB, hidden_size=32, intermediate_size=48,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=64, num_local_experts=4,
        num_experts_per_tok=2))
    lm.config.use_cache = False
    lm.eval()
    model = tiny_gpt.make_distinct(hf_models.LogitsOnly(lm))
    if tie:
        with torch.no_grad():
            for layer in lm.model.layers:
                gate = layer.block_sparse_moe.gate.weight
                gate[2] = gate[1]
    return model


def boundary_ties(model, tokens):
    """Tokens whose top-2 holds exactly one of experts 1 and 2 while the
    two score bitwise equal: where the tie-break decides the routing."""
    count = []

    def hook(module, args, logits):
        p = torch.softmax(logits, -1)
        top = p.topk(2, -1).indices
        one = (top == 1).any(-1) ^ (top == 2).any(-1)
        count.append(int((one & (p[:, 1] == p[:, 2])).sum()))

    hooks = [layer.block_sparse_moe.gate.register_forward_hook(hook)
             for layer in model.lm.model.layers]
    with torch.no_grad():
        model(tokens)
    for h in hooks:
        h.remove()
    return sum(count)
