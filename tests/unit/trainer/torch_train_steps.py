#!/usr/bin/env python3
"""PyTorch's side of trainer/steps_vs_torch (CPU) and the gpu suite's train_vs_torch: trains the GPT that
srunway-train trains, from the parameters it started from and on the samples it read (trainer-train-dump's
init.safetensors and tokens.bin), with the same optimizer (AdamW, decay only where srunway-train decays, constant
learning rate, clipping at the global norm), and prints one loss per step.

Usage: torch_train_steps.py DUMP_DIR STEPS BATCH SEQ LR PRECISION DEVICE [EOD [USES]]
  PRECISION bf16: autocast to bfloat16 over fp32 parameters (what srunway-train does on a GPU); fp32: none
  DEVICE    cuda or cpu
  EOD       the end-of-document token, for USES: a comma-separated list of Megatron's flags that read it,
            mask-loss (--eod-mask-loss, the default: no loss where the input token is EOD; the mean over the other
            positions), reset-positions (--reset-position-ids) and reset-attention (--reset-attention-mask), as
            Megatron's get_ltor_masks_and_position_ids makes them
"""
import json
import struct
import sys

import torch
import torch.nn.functional as F


def load(path):
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        data = f.read()
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        assert info["dtype"] == "F32", name
        tensors[name] = torch.frombuffer(bytearray(data[begin:end]), dtype=torch.float32).reshape(info["shape"]).clone()
    return tensors, meta


def attention(q, k, v, allowed=None):
    """Causal attention; `allowed` [B, T, T] (True: query t may see key t2) in its place where given."""
    if hasattr(F, "scaled_dot_product_attention"):  # PyTorch 2 (flash attention on a GPU)
        if allowed is None:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed[:, None])
    T = q.shape[-2]  # PyTorch 1.13, as Debian packages it
    scores = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
    if allowed is None:
        allowed = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()[None]
    return scores.masked_fill(~allowed[:, None], float("-inf")).softmax(dim=-1) @ v


def documents(tokens, eod, reset_positions, reset_attention):
    """Megatron's get_ltor_masks_and_position_ids: position ids [B, T] and the attention allowed [B, T, T]."""
    B, T = tokens.shape
    position_ids = torch.arange(T, device=tokens.device).unsqueeze(0).repeat(B, 1)
    allowed = torch.ones(T, T, dtype=torch.bool, device=tokens.device).tril().unsqueeze(0).repeat(B, 1, 1)
    for b in range(B):
        prev_index = 0
        for i in (tokens[b] == eod).nonzero().flatten().tolist():
            if reset_attention:
                allowed[b, i + 1:, : i + 1] = False
            if reset_positions:
                position_ids[b, i + 1:] -= i + 1 - prev_index
                prev_index = i + 1
    return position_ids, allowed


def loss_of(p, config, tokens, targets, eod=None, uses=("mask-loss",)):
    B, T = tokens.shape
    C, H, eps = config["d_model"], config["n_head"], config["norm_eps"]
    positions, allowed = torch.arange(T, device=tokens.device)[None], None
    if eod is not None and ("reset-positions" in uses or "reset-attention" in uses):
        positions, allowed = documents(tokens, eod, "reset-positions" in uses, "reset-attention" in uses)
    x = p["wte"][tokens] + p["wpe"][positions]
    for l in range(config["n_layer"]):
        pre = f"layers.{l}."
        h = F.layer_norm(x, (C,), p[pre + "norm1.weight"], p[pre + "norm1.bias"], eps)
        q, k, v = F.linear(h, p[pre + "qkv.weight"], p[pre + "qkv.bias"]).split(C, dim=2)
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
        y = attention(q, k, v, allowed).transpose(1, 2).reshape(B, T, C)
        x = x + F.linear(y, p[pre + "proj.weight"], p[pre + "proj.bias"])
        h = F.layer_norm(x, (C,), p[pre + "norm2.weight"], p[pre + "norm2.bias"], eps)
        h = F.gelu(F.linear(h, p[pre + "fc.weight"], p[pre + "fc.bias"]), approximate="tanh")
        x = x + F.linear(h, p[pre + "out.weight"], p[pre + "out.bias"])
    x = F.layer_norm(x, (C,), p["norm_f.weight"], p["norm_f.bias"], eps)
    logits = F.linear(x, p["wte"])
    if eod is None or "mask-loss" not in uses:
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))
    # Megatron's loss mask: sum(losses * mask) / sum(mask).
    losses = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1), reduction="none")
    mask = (tokens.reshape(-1) != eod).float()
    return (losses * mask).sum() / mask.sum()


def main():
    dump, steps, batch, seq, lr, precision, where = (sys.argv[1], *map(int, sys.argv[2:5]), float(sys.argv[5]),
                                                     sys.argv[6], sys.argv[7])
    eod = int(sys.argv[8]) if len(sys.argv) > 8 else None
    uses = sys.argv[9].split(",") if len(sys.argv) > 9 else ["mask-loss"]
    assert set(uses) <= {"mask-loss", "reset-positions", "reset-attention"}, uses
    tensors, meta = load(f"{dump}/init.safetensors")
    config = json.loads(meta["config"])
    decay = json.loads(meta["decay"])
    assert config["arch"] == "gpt", "this peer is written for GPT"
    device = torch.device(where)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    p = {name: t.to(device).requires_grad_() for name, t in tensors.items()}
    opt = torch.optim.AdamW(
        [{"params": [t for n, t in p.items() if decay[n]], "weight_decay": 0.01},
         {"params": [t for n, t in p.items() if not decay[n]], "weight_decay": 0.0}],
        lr=lr, betas=(0.9, 0.999), eps=1e-8)
    samples = torch.frombuffer(bytearray(open(f"{dump}/tokens.bin", "rb").read()), dtype=torch.int32)
    samples = samples[: steps * batch * (seq + 1)].reshape(steps, batch, seq + 1).to(device).long()  # the first steps
    for step in range(steps):
        with torch.autocast(where, dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = loss_of(p, config, samples[step, :, :-1], samples[step, :, 1:], eod, uses)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(p.values()), 1.0)
        opt.step()
        print(step + 1, loss.item())


if __name__ == "__main__":
    main()
