"""The torch modules that make_models.py exports to ONNX.

GPT-2 style, Llama style, a TransformerEncoder classifier and torchvision's
VisionTransformer, defined inside define_models(torch) so that importing this
module needs no torch (make_models.py imports torch late, quietly).
"""

import math


def define_models(torch):
    nn = torch.nn

    # ----- GPT-2 style ------------------------------------------------------
    class GPTAttention(nn.Module):
        def __init__(self, d, n_head, block_size):
            super().__init__()
            self.n_head = n_head
            self.head_dim = d // n_head
            self.c_attn = nn.Linear(d, 3 * d)
            self.c_proj = nn.Linear(d, d)
            # Persistent buffer, as in GPT-2: exported as an initializer.
            self.register_buffer(
                "bias", torch.tril(torch.ones(block_size, block_size)).bool()
            )

        def forward(self, x):
            b, s, d = x.shape
            q, k, v = self.c_attn(x).split(d, dim=2)
            q = q.view(b, s, self.n_head, self.head_dim).transpose(1, 2)
            k = k.view(b, s, self.n_head, self.head_dim).transpose(1, 2)
            v = v.view(b, s, self.n_head, self.head_dim).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
            mask = self.bias[:s, :s]
            att = att.masked_fill(~mask, float("-inf"))
            att = torch.softmax(att, dim=-1)
            y = att @ v
            y = y.transpose(1, 2).reshape(b, s, d)
            return self.c_proj(y)

    class GPTMLP(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.c_fc = nn.Linear(d, 4 * d)
            self.c_proj = nn.Linear(4 * d, d)

        def forward(self, x):
            x = self.c_fc(x)
            x = 0.5 * x * (
                1.0
                + torch.tanh(
                    math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))
                )
            )
            return self.c_proj(x)

    class GPTBlock(nn.Module):
        def __init__(self, d, n_head, block_size):
            super().__init__()
            self.ln_1 = nn.LayerNorm(d)
            self.attn = GPTAttention(d, n_head, block_size)
            self.ln_2 = nn.LayerNorm(d)
            self.mlp = GPTMLP(d)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            x = x + self.mlp(self.ln_2(x))
            return x

    class GPT(nn.Module):
        def __init__(self, vocab=64, block_size=32, n_layer=2, n_head=4, d=32):
            super().__init__()
            self.wte = nn.Embedding(vocab, d)
            self.wpe = nn.Embedding(block_size, d)
            self.h = nn.ModuleList(
                [GPTBlock(d, n_head, block_size) for _ in range(n_layer)]
            )
            self.ln_f = nn.LayerNorm(d)
            self.lm_head = nn.Linear(d, vocab, bias=False)
            self.lm_head.weight = self.wte.weight  # tied
            # Broadcast the position ids to [batch, seq] explicitly, as some
            # HF models do. The result is the same; the export gains
            # Expand/ConstantOfShape/Equal/Where shape arithmetic (and one
            # Shape even when static), so only the dynamic export sets it.
            self.expand_positions = False

        def forward(self, tokens):
            b, s = tokens.shape
            pos = torch.arange(0, s, dtype=torch.long, device=tokens.device)
            if self.expand_positions:
                pos = pos.unsqueeze(0).expand(b, s)
            x = self.wte(tokens) + self.wpe(pos)
            for block in self.h:
                x = block(x)
            return self.lm_head(self.ln_f(x))

    # ----- Llama / Qwen style -----------------------------------------------
    class RMSNorm(nn.Module):
        def __init__(self, d, eps=1e-6):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(d))

        def forward(self, x):
            # Pow / ReduceMean / Add / Sqrt / Div, then Mul by the weight.
            return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    def rotate_half(x):
        half = x.shape[-1] // 2
        x1 = x[..., :half]
        x2 = x[..., half:]
        return torch.cat((-x2, x1), dim=-1)

    def repeat_kv(x, n_rep):
        b, hkv, s, d = x.shape
        if n_rep == 1:
            return x
        x = x[:, :, None, :, :].expand(b, hkv, n_rep, s, d)
        return x.reshape(b, hkv * n_rep, s, d)

    class LlamaAttention(nn.Module):
        def __init__(self, d, n_head, n_kv_head, max_pos, theta=10000.0):
            super().__init__()
            self.n_head = n_head
            self.n_kv_head = n_kv_head
            self.head_dim = d // n_head
            self.q_proj = nn.Linear(d, n_head * self.head_dim, bias=False)
            self.k_proj = nn.Linear(d, n_kv_head * self.head_dim, bias=False)
            self.v_proj = nn.Linear(d, n_kv_head * self.head_dim, bias=False)
            self.o_proj = nn.Linear(n_head * self.head_dim, d, bias=False)
            inv_freq = 1.0 / (
                theta
                ** (torch.arange(0, self.head_dim, 2, dtype=torch.float32) / self.head_dim)
            )
            t = torch.arange(max_pos, dtype=torch.float32)
            freqs = torch.outer(t, inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1)
            self.register_buffer("cos_cached", emb.cos(), persistent=False)
            self.register_buffer("sin_cached", emb.sin(), persistent=False)

        def forward(self, x):
            b, s, _ = x.shape
            q = self.q_proj(x).view(b, s, self.n_head, self.head_dim).transpose(1, 2)
            k = self.k_proj(x).view(b, s, self.n_kv_head, self.head_dim).transpose(1, 2)
            v = self.v_proj(x).view(b, s, self.n_kv_head, self.head_dim).transpose(1, 2)
            cos = self.cos_cached[:s]
            sin = self.sin_cached[:s]
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            n_rep = self.n_head // self.n_kv_head
            k = repeat_kv(k, n_rep)
            v = repeat_kv(v, n_rep)
            scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
            # Not torch.tensor(min) (an onnx::Where_N initializer) nor a Python
            # scalar (exported as a double Constant that onnxruntime rejects).
            future = torch.triu(torch.full((s, s), 1.0), diagonal=1).bool()
            fill = torch.full((s, s), torch.finfo(torch.float32).min)
            scores = torch.where(future, fill, scores)
            probs = torch.softmax(scores, dim=-1)
            y = torch.matmul(probs, v)
            y = y.transpose(1, 2).reshape(b, s, self.n_head * self.head_dim)
            return self.o_proj(y)

    class LlamaMLP(nn.Module):
        def __init__(self, d, ff):
            super().__init__()
            self.gate_proj = nn.Linear(d, ff, bias=False)
            self.up_proj = nn.Linear(d, ff, bias=False)
            self.down_proj = nn.Linear(ff, d, bias=False)

        def forward(self, x):
            g = self.gate_proj(x)
            return self.down_proj(g * torch.sigmoid(g) * self.up_proj(x))

    class LlamaDecoderLayer(nn.Module):
        def __init__(self, d, n_head, n_kv_head, ff, max_pos):
            super().__init__()
            self.input_layernorm = RMSNorm(d)
            self.self_attn = LlamaAttention(d, n_head, n_kv_head, max_pos)
            self.post_attention_layernorm = RMSNorm(d)
            self.mlp = LlamaMLP(d, ff)

        def forward(self, x):
            x = x + self.self_attn(self.input_layernorm(x))
            x = x + self.mlp(self.post_attention_layernorm(x))
            return x

    class Llama(nn.Module):
        def __init__(self, vocab=128, d=64, n_layer=2, n_head=4, n_kv_head=2, ff=128,
                     max_pos=32):
            super().__init__()
            self.embed_tokens = nn.Embedding(vocab, d)
            self.layers = nn.ModuleList(
                [LlamaDecoderLayer(d, n_head, n_kv_head, ff, max_pos)
                 for _ in range(n_layer)]
            )
            self.norm = RMSNorm(d)
            self.lm_head = nn.Linear(d, vocab, bias=False)

        def forward(self, tokens):
            x = self.embed_tokens(tokens)
            for layer in self.layers:
                x = layer(x)
            return self.lm_head(self.norm(x))

    # ----- nn.TransformerEncoder --------------------------------------------
    class Encoder(nn.Module):
        def __init__(self, vocab=64, d=32):
            super().__init__()
            self.embed = nn.Embedding(vocab, d)
            self.encoder = nn.TransformerEncoder(
                nn.TransformerEncoderLayer(
                    d_model=d, nhead=4, dim_feedforward=64, dropout=0.0,
                    batch_first=True,
                ),
                num_layers=2,
            )
            self.head = nn.Linear(d, vocab)

        def forward(self, tokens):
            return self.head(self.encoder(self.embed(tokens)))

    def vit():
        import torchvision

        return torchvision.models.VisionTransformer(
            image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32,
            mlp_dim=64, num_classes=10,
        )

    return GPT, Llama, Encoder, vit
