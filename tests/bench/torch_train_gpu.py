#!/usr/bin/env python3
"""The PyTorch peer of srunway-train on a GPU for tests/bench/train_gpu_vs_torch.sh: the same GPT (learned
positions, LayerNorm, tanh GELU, tied embeddings, biases), bf16 autocast over fp32 parameters, flash attention
through F.scaled_dot_product_attention(is_causal=True), fused AdamW with the same decay groups, clipping at 1.0,
random tokens, and torch.compile unless MODE is eager. The first WARMUP steps (compilation) are not timed; every
timed step ends with a device synchronisation. Prints one line:
  tokens_per_s=<median over the timed steps> peak_gib=<torch.cuda.max_memory_allocated()> torch=<version>

Usage: torch_train_gpu.py LAYERS HIDDEN HEADS SEQ VOCAB BATCH STEPS WARMUP MODE
"""
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, layers, d, heads, seq, vocab):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)
        return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.reshape(-1))


def main():
    layers, d, heads, seq, vocab, batch, steps, warmup = map(int, sys.argv[1:9])
    mode = sys.argv[9]
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = True
    device = torch.device("cuda")
    model = Gpt(layers, d, heads, seq, vocab).to(device)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=3e-4, fused=True)
    step_fn = torch.compile(model) if mode == "compile" else model
    times = []
    for step in range(warmup + steps):
        data = torch.randint(0, vocab, (batch, seq + 1), device=device)
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_fn(data[:, :-1], data[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        torch.cuda.synchronize()
        if step >= warmup:
            times.append(time.perf_counter() - start)
    print(f"tokens_per_s={batch * seq / statistics.median(times):.1f} "
          f"peak_gib={torch.cuda.max_memory_allocated() / 2**30:.2f} torch={torch.__version__}")


if __name__ == "__main__":
    main()
