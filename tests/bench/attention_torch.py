"""Benchmark helper: PyTorch's scaled_dot_product_attention (causal, bf16, q/k/v [B, H, T, hd]) at one shape on
this GPU, forward and backward, with each backend this PyTorch offers here, one line each:
  backend=NAME forward_ms=F backward_ms=B      (the backward: forward + backward, less the forward)
  backend=NAME unavailable=REASON
With DOCUMENT, each sequence holds documents of that many tokens and each token attends within its own
(Megatron's --reset-attention-mask), through an explicit boolean mask [B, 1, T, T], which the efficient and math
backends take.
Usage: attention_torch.py B T H KV HEAD_DIM ITERATIONS [DOCUMENT]"""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def mean_ms(fn, iterations):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(iterations):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iterations


def main():
    B, T, H, KV, hd, iterations = (int(x) for x in sys.argv[1:7])
    document = int(sys.argv[7]) if len(sys.argv) > 7 else 0
    gen = torch.Generator(device="cuda").manual_seed(7)
    def tensor(heads):
        return torch.randn(B, heads, T, hd, device="cuda", dtype=torch.bfloat16, generator=gen, requires_grad=True)
    q, k, v = tensor(H), tensor(KV), tensor(KV)
    dout = torch.randn(B, H, T, hd, device="cuda", dtype=torch.bfloat16, generator=gen)
    extra = {"enable_gqa": True} if KV != H else {}
    if document:
        t = torch.arange(T, device="cuda")
        allowed = (t[None, :] <= t[:, None]) & (t[None, :] // document == t[:, None] // document)
        extra["attn_mask"] = allowed.expand(B, 1, T, T)
    else:
        extra["is_causal"] = True

    def forward():
        return F.scaled_dot_product_attention(q, k, v, **extra)

    def forward_backward():
        torch.autograd.grad(forward(), (q, k, v), dout)

    backends = (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                ("efficient", SDPBackend.EFFICIENT_ATTENTION))
    if document:  # FlashAttention-2 takes no mask, nor does PyTorch's cuDNN backend a boolean one
        backends = (("efficient", SDPBackend.EFFICIENT_ATTENTION), ("math", SDPBackend.MATH))
    for name, backend in backends:
        try:
            with sdpa_kernel(backend):
                for _ in range(3):
                    forward_backward()
                forward_ms = mean_ms(forward, iterations)
                both_ms = mean_ms(forward_backward, iterations)
        except RuntimeError as error:
            reason = str(error).splitlines()[0][:120].replace(" ", "_") if str(error) else type(error).__name__
            print(f"backend={name} unavailable={reason}")
            continue
        print(f"backend={name} forward_ms={forward_ms:.4f} backward_ms={max(both_ms - forward_ms, 0.0):.4f}")


if __name__ == "__main__":
    main()
