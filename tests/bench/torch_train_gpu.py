#!/usr/bin/env python3
"""The PyTorch peer of srunway-train on a GPU for tests/bench/train_gpu_vs_torch.sh: torch_train.py's GPT (learned
positions, LayerNorm, tanh GELU, tied embeddings, biases), bf16 autocast over fp32 parameters, flash attention
through F.scaled_dot_product_attention(is_causal=True), fused AdamW with the same decay groups, clipping at 1.0,
random tokens, and torch.compile unless MODE is eager. The first WARMUP steps (compilation) are not timed; every
timed step ends with a device synchronisation. Prints one line:
  tokens_per_s=<median over the timed steps> peak_gib=<torch.cuda.max_memory_allocated()> torch=<version>

Usage: torch_train_gpu.py LAYERS HIDDEN HEADS SEQ VOCAB BATCH STEPS WARMUP MODE
"""
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_train import Gpt  # noqa: E402  (the same model as the CPU benchmark's)


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
