"""Regenerates the torch 2 / transformers 5 fixtures in Inputs/torch2/.

CI runs Debian's torch 1.13, which can neither run transformers 5 nor
torch 2's dynamo exporter, so the exports of those are committed, with the
PyTorch references they are checked against (torch2-fixtures.py). Run
with the torch-2 venv scripts/setup.sh makes (torch 2, transformers 5,
onnxscript):

    .venv-torch2/bin/python test/python/Inputs/make_torch2_fixtures.py

For each tiny causal LM (config objects only, HF_HUB_OFFLINE=1, distinct
random weights) it writes, for the TorchScript exporter at opset 17
(`<model>-torchscript.onnx`) and the dynamo exporter at opset 18
(`<model>-dynamo.onnx`, optimize=False: the optimizer would fold weight
transposes into unnamed initializers), a model for one sequence of 16
tokens, and one
`<model>.npz` holding a global batch of 4 sequences (`tokens`, `labels`),
PyTorch's step-0 loss on it (`loss`), and each parameter's gradient under
the name each export gives it (`grad/<export>/<initializer name>`).
"""

import os
import sys
import warnings

os.environ["HF_HUB_OFFLINE"] = "1"

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402
import transformers as T  # noqa: E402

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch2")
VOCAB, SEQ, BATCH = 32, 16, 4


def llama_like(config_cls, model_cls, **extra):
    return model_cls(config_cls(
        vocab_size=VOCAB, hidden_size=16, intermediate_size=24,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=32, **extra))


MODELS = {
    "llama": lambda: llama_like(T.LlamaConfig, T.LlamaForCausalLM),
    "qwen2": lambda: llama_like(T.Qwen2Config, T.Qwen2ForCausalLM),
    "qwen3": lambda: llama_like(T.Qwen3Config, T.Qwen3ForCausalLM,
                                head_dim=4),
    "mistral": lambda: llama_like(T.MistralConfig, T.MistralForCausalLM,
                                  sliding_window=4),
    "gpt2": lambda: T.GPT2LMHeadModel(T.GPT2Config(
        vocab_size=VOCAB, n_embd=16, n_layer=2, n_head=4, n_positions=32,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)),
}


class LogitsOnly(torch.nn.Module):
    """The logits for `input_ids`. The all-ones attention mask, made from
    the input's shape, is what a user without padding passes; without it
    transformers 5 looks for packed sequences with aten::diff, which the
    TorchScript exporter cannot export."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, input_ids):
        return self.lm(input_ids=input_ids,
                       attention_mask=torch.ones_like(input_ids),
                       use_cache=False, return_dict=False)[0]


def make(name):
    torch.manual_seed(0)
    lm = MODELS[name]()
    lm.config.use_cache = False
    lm.eval()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():  # distinct values: exporters merge equal ones
        for p in lm.parameters():
            p.add_(0.02 * torch.randn(p.shape, generator=g))
    return LogitsOnly(lm)


def export(model, tokens, path, dynamo):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dynamo:
            torch.onnx.export(model, (tokens,), path, dynamo=True,
                              opset_version=18, input_names=["input_ids"],
                              output_names=["logits"], external_data=False,
                              optimize=False)
        else:
            torch.onnx.export(model, (tokens,), path, dynamo=False,
                              opset_version=17, input_names=["input_ids"],
                              output_names=["logits"],
                              do_constant_folding=False)


def strip(path):
    """Drops the doc strings and per-node metadata (stack traces) the
    exporters write, which would make up most of the committed bytes."""
    model = onnx.load(path)
    model.graph.doc_string = ""
    for node in model.graph.node:
        node.doc_string = ""
        del node.metadata_props[:]
    del model.graph.value_info[:]
    onnx.save(model, path)


def grad_names(path, params):
    """Initializer name -> parameter name, matched by value (each export
    names parameters its own way; the values are distinct)."""
    model = onnx.load(path)
    out = {}
    for init in model.graph.initializer:
        value = onnx.numpy_helper.to_array(init)
        for name, p in params.items():
            if p.shape == value.shape and np.array_equal(p, value):
                out[init.name] = name
    return out


def main():
    os.makedirs(HERE, exist_ok=True)
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    labels = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    labels.view(-1)[::5] = -100
    for name in sys.argv[1:] or MODELS:
        model = make(name)
        logits = model(tokens)
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, VOCAB), labels.reshape(-1), ignore_index=-100)
        loss.backward()
        grads = {n: p.grad.detach().numpy() for n, p in model.named_parameters()}
        params = {n: p.detach().numpy() for n, p in model.named_parameters()}
        saved = {"tokens": tokens.numpy(), "labels": labels.numpy(),
                 "loss": np.array(loss.item())}
        model.zero_grad()
        for kind in ("torchscript", "dynamo"):
            path = os.path.join(HERE, f"{name}-{kind}.onnx")
            export(model, tokens[:1], path, kind == "dynamo")
            strip(path)
            for init, pname in grad_names(path, params).items():
                saved[f"grad/{kind}/{init}"] = grads[pname]
        np.savez_compressed(os.path.join(HERE, f"{name}.npz"), **saved)
        print(name, f"loss {loss.item():.6f}",
              sum(k.startswith("grad/") for k in saved), "gradients")


if __name__ == "__main__":
    main()
