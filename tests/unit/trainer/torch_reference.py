#!/usr/bin/python3
"""PyTorch is the judge: recomputes every CPU op (forward and backward) and one whole training step of the tiny
GPT and Llama from what trainer-torch-dump wrote, and fails on any difference beyond the stated tolerances.

Usage: torch_reference.py TORCH_DUMP_EXE WORK_DIR

Tolerances (fp32 on both sides, different summation orders):
  ops:            |ours - torch| <= 1e-5 + 1e-4 * |torch|, element by element
  loss:           |ours - torch| <= 1e-5
  gradients:      max |ours - torch| <= 1e-4 * max |torch| per tensor (plus 1e-8)
  updated params: |ours - torch| <= 1e-5 + 1e-4 * |torch|, PyTorch's clipping and AdamW given our gradients (the
                  gradients are judged above): one AdamW step at lr 1e-3 moves a weight by up to 1e-3, and where a
                  gradient is as small as AdamW's eps (1e-8) the step g / (|g| + eps) turns a last-bit difference
                  in g into up to a few 1e-6; 1e-5 is 1% of a step
"""
import json
import math
import struct
import subprocess
import sys

import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float32)
failures = []


def load(path):
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        data = f.read()
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        kind = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}[info["dtype"]]
        t = torch.frombuffer(bytearray(data[begin:end]), dtype=kind).reshape(info["shape"])
        tensors[name] = t.clone()
    return tensors


def check(what, ours, ref, atol, rtol):
    ours = ours.detach().reshape(ref.shape)
    ref = ref.detach()
    err = (ours - ref).abs()
    bound = atol + rtol * ref.abs()
    ok = bool((err <= bound).all())
    print(f"{'ok  ' if ok else 'FAIL'} {what}: max abs err {err.max().item():.3g} (max |torch| {ref.abs().max().item():.3g})")
    if not ok:
        failures.append(what)


def check_op(name, t, inputs, forward, outputs, grads):
    """inputs: names of tensors that get gradients; outputs/grads: (our name, torch value) pairs."""
    leaves = {k: t[k].clone().requires_grad_(True) for k in inputs}
    result = forward(leaves)
    for our_name, value in zip(outputs, result if isinstance(result, tuple) else (result,)):
        check(f"{name} {our_name}", t[our_name], value, 1e-5, 1e-4)
    out = result[0] if isinstance(result, tuple) else result
    out.backward(t["dout"])
    for our_name, leaf in grads:
        check(f"{name} {our_name}", t[our_name], leaves[leaf].grad, 1e-5, 1e-4)


def causal_attention(qkv, H, KV, hd, att_mask=None, window=None, sinks=None):
    """window: each query attends to itself and this many keys before it (Megatron's --window-size window,0); sinks:
    [H], each head's sink score, a key of value 0 past the last (Megatron's --softmax-type off-by-one, all 0, or
    learnable), or None."""
    B, T, _ = qkv.shape
    q, k, v = qkv.split([H * hd, KV * hd, KV * hd], dim=-1)
    q = q.view(B, T, H, hd).transpose(1, 2)
    k = k.view(B, T, KV, hd).transpose(1, 2).repeat_interleave(H // KV, dim=1)
    v = v.view(B, T, KV, hd).transpose(1, 2).repeat_interleave(H // KV, dim=1)
    att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    if window is not None:
        mask = mask.triu(-window)
    att = att.masked_fill(~mask, float("-inf"))
    if sinks is not None:  # the sink's column, dropped after the softmax: its value is 0
        att = torch.cat([att, sinks.view(1, H, 1, 1).expand(B, H, T, 1)], dim=-1).softmax(dim=-1)[..., :T]
    else:
        att = att.softmax(dim=-1)
    weights = att if att_mask is None else att * att_mask
    return (weights @ v).transpose(1, 2).reshape(B, T, H * hd), att


def glu(h, quick=None):
    """A Llama's gated FFN activation of h = [gate | up]: SwiGLU, or with quick = (alpha, offset, clamp) Megatron's
    glu with --quick-geglu (quick_gelu(x) = x sigmoid(alpha x)), --glu-linear-offset and
    --activation-func-clamp-value (gate clamped above, up on both sides; PyTorch's clamp passes gradients within the
    bounds, ends included; None: none); alpha "gelu" is GeGLU (--geglu: GELU's tanh approximation, Gemma's)."""
    gate, up = h.chunk(2, dim=-1)
    if quick is None:
        return F.silu(gate) * up
    alpha, offset, clamp = quick
    if clamp is not None:
        gate = gate.clamp(max=clamp)
        up = up.clamp(min=-clamp, max=clamp)
    act = F.gelu(gate, approximate="tanh") if alpha == "gelu" else gate * torch.sigmoid(alpha * gate)
    return act * (up + offset)


def llama3_inv_freq(inv_freq, scaling):
    """Llama 3.1's RoPE scaling as Hugging Face's _compute_llama3_parameters computes it (`scaling`: its
    rope_scaling dict)."""
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old = scaling["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > old / low, inv_freq / factor, inv_freq)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < old / high) * ~(wavelen > old / low)
    return torch.where(medium, smoothed, scaled)


def scaled_inv_freq(inv_freq, scaling):
    """A rope_scaling dict applied as Hugging Face applies it: rope_type linear divides every frequency by its factor
    (_compute_linear_scaling_rope_parameters); llama3, the default here, is Llama 3.1's."""
    if scaling.get("rope_type", scaling.get("type")) == "linear":
        return inv_freq / scaling["factor"]
    return llama3_inv_freq(inv_freq, scaling)


# Megatron's YarnRotaryEmbedding's defaults.
YARN = {"rope_type": "yarn", "rotary_scaling_factor": 1.0, "original_max_position_embeddings": 4096, "beta_fast": 32.0,
        "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 0.0, "correction_range_round_to_int": True}


def yarn_inv_freq(hd, theta, scaling):
    """YaRN's frequencies and attention factor as Megatron's YarnRotaryEmbedding computes them (`scaling`: its
    numbers, Megatron's yarn_* names less the prefix, with rope_type yarn): the pairs between those that turn
    beta_fast and beta_slow times over the original positions blend the frequency divided by the factor into it."""
    factor = scaling["rotary_scaling_factor"]

    def pair(rotations):
        return hd * math.log(scaling["original_max_position_embeddings"] / (rotations * 2 * math.pi)) / (
            2 * math.log(theta))

    low, high = pair(scaling["beta_fast"]), pair(scaling["beta_slow"])
    if scaling["correction_range_round_to_int"]:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, hd - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(hd // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    powers = theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd)
    inv_freq = 1.0 / (factor * powers) * ramp + 1.0 / powers * (1 - ramp)

    def mscale(a):
        return 1.0 if factor <= 1 else 0.1 * a * math.log(factor) + 1.0

    return inv_freq, mscale(scaling["mscale"]) / mscale(scaling["mscale_all_dim"])


def rope(x, theta, scaling=None, rotary_dim=None, interleaved=False):
    """x: [B, T, heads, hd]; rotate-half pairing (i, i + hd/2); `scaling`: a rope_scaling dict (scaled_inv_freq);
    `rotary_dim`: only each head's first this many dimensions turn, pairs (i, i + rotary_dim/2), the rest pass
    (Megatron's rotary_percent: its apply_rotary_pos_emb splits t[..., :rot_dim] from t[..., rot_dim:]);
    `scaling` of rope_type longrope: LongRoPE's factors and attention factor, as our header records them;
    `interleaved`: the pairs are (2i, 2i + 1), Megatron's rotary_interleaved (its _rotate_half takes x[..., ::2] and
    x[..., 1::2], its frequencies each repeated in place)."""
    if rotary_dim is not None and rotary_dim < x.shape[-1]:
        return torch.cat([rope(x[..., :rotary_dim], theta, scaling, interleaved=interleaved), x[..., rotary_dim:]],
                         dim=-1)
    if interleaved:  # the pairs gathered into two halves, turned as such, and put back side by side
        halves = torch.cat([x[..., ::2], x[..., 1::2]], dim=-1)
        turned = rope(halves, theta, scaling)
        return torch.stack([turned[..., : x.shape[-1] // 2], turned[..., x.shape[-1] // 2:]], dim=-1).flatten(-2)
    T, hd = x.shape[1], x.shape[-1]
    inv_freq = theta ** (-torch.arange(0, hd // 2, dtype=torch.float32) * 2 / hd)
    attention_factor = 1.0
    if scaling is not None and scaling.get("rope_type") == "yarn":
        inv_freq, attention_factor = yarn_inv_freq(hd, theta, scaling)
    elif scaling is not None and scaling.get("rope_type") == "longrope":
        # Phi-3's (transformers' _compute_longrope_parameters and its switch on the sequence's length): each pair's
        # frequency divided by its short factor in sequences up to the original positions, its long one past them.
        long = T > scaling["original_max_position_embeddings"]
        inv_freq = inv_freq / torch.tensor(scaling["long_factor" if long else "short_factor"], dtype=torch.float32)
        attention_factor = scaling["attention_factor"]
    elif scaling is not None:
        inv_freq = scaled_inv_freq(inv_freq, scaling)
    angles = torch.arange(T, dtype=torch.float32)[:, None] * inv_freq[None, :]
    # YaRN's factor multiplies cos and sin, as Megatron's apply_rotary_pos_emb takes them.
    cos = (angles.cos() * attention_factor)[None, :, None, :]
    sin = (angles.sin() * attention_factor)[None, :, None, :]
    x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def rope_qkv(qkv, H, KV, hd, theta, scaling=None, rotary_dim=None, interleaved=False):
    B, T, _ = qkv.shape
    q, k, v = qkv.split([H * hd, KV * hd, KV * hd], dim=-1)
    q = rope(q.reshape(B, T, H, hd), theta, scaling, rotary_dim, interleaved).reshape(B, T, H * hd)
    k = rope(k.reshape(B, T, KV, hd), theta, scaling, rotary_dim, interleaved).reshape(B, T, KV * hd)
    return torch.cat([q, k, v], dim=-1)


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def check_ops(d):
    t = load(f"{d}/layernorm.safetensors")
    check_op("layernorm", t, ["inp", "weight", "bias"],
             lambda p: F.layer_norm(p["inp"], (p["inp"].shape[-1],), p["weight"], p["bias"], 1e-5),
             ["out"], [("dinp", "inp"), ("dweight", "weight"), ("dbias", "bias")])
    t = load(f"{d}/rmsnorm.safetensors")
    check_op("rmsnorm", t, ["inp", "weight"], lambda p: rms_norm(p["inp"], p["weight"], 1e-5),
             ["out"], [("dinp", "inp"), ("dweight", "weight")])
    t = load(f"{d}/matmul.safetensors")
    check_op("matmul", t, ["inp", "weight", "bias"], lambda p: F.linear(p["inp"], p["weight"], p["bias"]),
             ["out"], [("dinp", "inp"), ("dweight", "weight"), ("dbias", "bias")])
    t = load(f"{d}/attention.safetensors")
    check_op("attention", t, ["qkv"], lambda p: causal_attention(p["qkv"], 4, 2, 8),
             ["out", "att"], [("dqkv", "qkv")])
    t = load(f"{d}/rope.safetensors")
    check_op("rope", t, ["inp"], lambda p: rope_qkv(p["inp"], 4, 2, 8, 10000.0), ["out"], [("dinp", "inp")])
    t = load(f"{d}/rope_scaled.safetensors")
    scaling = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
    check_op("rope scaled", t, ["inp"], lambda p: rope_qkv(p["inp"], 2, 1, 8, 10000.0, scaling), ["out"],
             [("dinp", "inp")])
    t = load(f"{d}/rope_linear.safetensors")
    linear = {"rope_type": "linear", "factor": 4.0}
    check_op("rope linear", t, ["inp"], lambda p: rope_qkv(p["inp"], 2, 1, 8, 10000.0, linear), ["out"],
             [("dinp", "inp")])
    t = load(f"{d}/rope_yarn.safetensors")
    yarn = dict(YARN, rotary_scaling_factor=4.0, original_max_position_embeddings=64, mscale_all_dim=0.5,
                correction_range_round_to_int=False)
    check_op("rope yarn", t, ["inp"], lambda p: rope_qkv(p["inp"], 2, 1, 16, 10000.0, yarn), ["out"],
             [("dinp", "inp")])
    t = load(f"{d}/rope_partial.safetensors")
    check_op("rope partial", t, ["inp"], lambda p: rope_qkv(p["inp"], 2, 1, 16, 10000.0, rotary_dim=8), ["out"],
             [("dinp", "inp")])
    t = load(f"{d}/rope_interleaved.safetensors")
    check_op("rope interleaved", t, ["inp"],
             lambda p: rope_qkv(p["inp"], 2, 1, 16, 10000.0, rotary_dim=8, interleaved=True), ["out"],
             [("dinp", "inp")])
    longrope = {"rope_type": "longrope", "short_factor": [1.0, 1.5, 2.0, 4.0], "long_factor": [1.0, 3.0, 9.0, 27.0],
                "original_max_position_embeddings": 64, "attention_factor": 1.19}
    for which in ("short", "long"):
        t = load(f"{d}/rope_longrope_{which}.safetensors")
        check_op(f"rope longrope ({which})", t, ["inp"],
                 lambda p: rope_qkv(p["inp"], 2, 1, 16, 10000.0, longrope, rotary_dim=8), ["out"], [("dinp", "inp")])
    t = load(f"{d}/gelu.safetensors")
    check_op("gelu", t, ["inp"], lambda p: F.gelu(p["inp"], approximate="tanh"), ["out"], [("dinp", "inp")])
    t = load(f"{d}/gelu_erf.safetensors")
    check_op("gelu_erf", t, ["inp"], lambda p: F.gelu(p["inp"]), ["out"], [("dinp", "inp")])
    t = load(f"{d}/squared_relu.safetensors")
    check_op("squared_relu", t, ["inp"], lambda p: F.relu(p["inp"]) ** 2, ["out"], [("dinp", "inp")])
    t = load(f"{d}/swiglu.safetensors")

    def swiglu(p):
        gate, up = p["inp"].chunk(2, dim=-1)
        return F.silu(gate) * up
    check_op("swiglu", t, ["inp"], swiglu, ["out"], [("dinp", "inp")])
    t = load(f"{d}/quick_geglu.safetensors")
    check_op("quick_geglu", t, ["inp"], lambda p: glu(p["inp"], (1.702, 1.0, 1.5)), ["out"], [("dinp", "inp")])
    t = load(f"{d}/geglu.safetensors")
    check_op("geglu", t, ["inp"], lambda p: glu(p["inp"], ("gelu", 0.5, 1.5)), ["out"], [("dinp", "inp")])
    for name, scale in (("embedding", 1.0), ("embedding_scaled", 2.5)):
        t = load(f"{d}/{name}.safetensors")
        tokens = t["tokens"].long()
        check_op(name, t, ["wte", "wpe"], lambda p: scale * p["wte"][tokens] + p["wpe"][None, :, :],
                 ["out"], [("dwte", "wte"), ("dwpe", "wpe")])
    t = load(f"{d}/residual.safetensors")
    check_op("residual", t, ["a", "b"], lambda p: p["a"] + p["b"], ["out"], [("da", "a"), ("db", "b")])
    t = load(f"{d}/cross_entropy.safetensors")
    logits = t["logits"].clone().requires_grad_(True)
    targets = t["targets"].long()
    losses = F.cross_entropy(logits, targets, reduction="none")
    check("cross_entropy losses", t["losses"], losses, 1e-5, 1e-4)
    loss = losses.mean()
    check("cross_entropy mean", t["mean_loss"], loss.reshape(1), 1e-5, 1e-4)
    loss.backward()
    check("cross_entropy dlogits", t["dlogits"], logits.grad, 1e-5, 1e-4)


def model_loss(p, tokens, targets, llama, n_layer, H, KV, eps, theta, masks=None, scaling=None, squared_relu=False,
               rmsnorm=None, rotary_dim=None, interleaved=False, rope=True, no_rope=None, window=None,
               window_layers=None, off_by_one=False, quick=None, embed_scale=1.0, norm_1p=False, exact_gelu=False,
               gpt_rope=False):
    """masks: dropout site -> the mask (0 or 1 / (1 - p)) srunway-train drew, applied where Megatron applies dropout;
    scaling: RoPE's (Llama 3.1's, a rope_scaling dict) or None; squared_relu: a GPT's FFN is relu(x)^2, not GELU;
    rmsnorm: the norms are RMSNorm (None: the architecture's own, Llama's RMSNorm, GPT's LayerNorm with biases);
    rotary_dim: RoPE turns only each head's first this many dimensions (None: all); interleaved: its pairs are
    side by side; rope: a Llama turns q and k by RoPE (False: a model without positions, whose GPT has no wpe);
    no_rope: 1 for each layer that skips RoPE (Megatron's --no-rope-freq), or None; window: each query attends to
    itself and this many keys before it (--window-size window,0), in the layers window_layers marks 1 (all if None);
    off_by_one: attention's softmax has a sink of score 0 (--softmax-type off-by-one); where p has
    layers.L.softmax_offset, the sinks' scores are those (learnable); quick: a Llama's FFN activation (glu());
    embed_scale: the token embedding times it (--embedding-multiplier); norm_1p: the norms multiply by 1 + weight
    (--apply-layernorm-1p); exact_gelu: a GPT's GELU is erf's, not the tanh approximation (--no-bias-gelu-fusion);
    gpt_rope: a GPT turns q and k by RoPE, as a Llama (--position-embedding-type rope; it then has no wpe).
    Where p has layers.L.q_norm.weight, each head's q and k go through the model's norm over its hd values before
    RoPE (Megatron's --qk-layernorm; Qwen3's q_norm and k_norm)."""
    B, T = tokens.shape
    C = p["wte"].shape[1]
    hd = p["layers.0.qkv.weight"].shape[0] // (H + 2 * KV)  # C // H, unless --kv-channels says otherwise

    def drop(x, site):
        return x if masks is None else x * masks[site]

    x = embed_scale * p["wte"][tokens]
    if "wpe" in p:
        x = x + p["wpe"][:T][None]
    x = drop(x, 0)

    def norm(x, prefix):
        weight = p[prefix + ".weight"] + (1 if norm_1p else 0)
        if llama if rmsnorm is None else rmsnorm:
            return rms_norm(x, weight, eps)
        return F.layer_norm(x, (x.shape[-1],), weight, p[prefix + ".bias"], eps)

    def qk_norm(qkv, pre):
        q, k, v = qkv.split([H * hd, KV * hd, KV * hd], dim=-1)
        q = norm(q.unflatten(-1, (H, hd)), pre + "q_norm").flatten(-2)
        k = norm(k.unflatten(-1, (KV, hd)), pre + "k_norm").flatten(-2)
        return torch.cat([q, k, v], dim=-1)

    def linear(x, prefix):
        return F.linear(x, p[prefix + ".weight"], p.get(prefix + ".bias"))

    for l in range(n_layer):
        pre = f"layers.{l}."
        qkv = linear(norm(x, pre + "norm1"), pre + "qkv")
        if pre + "q_norm.weight" in p:
            qkv = qk_norm(qkv, pre)
        if (llama or gpt_rope) and rope and not (no_rope and no_rope[l]):
            qkv = rope_qkv(qkv, H, KV, hd, theta, scaling, rotary_dim, interleaved)
        windowed = window is not None and (window_layers is None or window_layers[l])
        sinks = p.get(pre + "softmax_offset", torch.zeros(H) if off_by_one else None)
        y, _ = causal_attention(qkv, H, KV, hd, None if masks is None else masks[2 + 3 * l],
                                window if windowed else None, sinks)
        x = x + drop(linear(y, pre + "proj"), 1 + 3 * l)
        h = linear(norm(x, pre + "norm2"), pre + "fc")
        if llama:
            h = glu(h, quick)
        else:
            h = (F.relu(h) ** 2 if squared_relu else F.gelu(h) if exact_gelu else
                 F.gelu(h, approximate="tanh"))
        x = x + drop(linear(h, pre + "out"), 3 + 3 * l)
    x = norm(x, "norm_f")
    logits = F.linear(x, p.get("lm_head.weight", p["wte"]))  # the output layer its own, or tied to the embedding
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def check_step(d, preset, llama, n_layer, H, KV, squared_relu=False, rmsnorm=None, rotary_dim=None, interleaved=False,
               rope=True, no_rope=None, window=None, window_layers=None, off_by_one=False, quick=None, scaling=None,
               embed_scale=1.0, norm_1p=False, exact_gelu=False, gpt_rope=False):
    before = load(f"{d}/{preset}-before.safetensors")
    grads = load(f"{d}/{preset}-grads.safetensors")
    after = load(f"{d}/{preset}-after.safetensors")
    tokens, targets = before.pop("_tokens").long(), before.pop("_targets").long()
    masks = {int(k.split(".")[1]): before.pop(k) for k in list(before) if k.startswith("_mask.")} or None
    # The output layer its own (a Llama's, an -untied or -nemotron step's) or the embedding again (a GPT's, a -tied
    # step's).
    own_head = "-untied" in preset or "-nemotron" in preset or (llama and "-tied" not in preset)
    if ("lm_head.weight" in before) != own_head:
        print(f"FAIL {preset} head: lm_head.weight {'missing' if own_head else 'present'}")
        failures.append(f"{preset} head")
    # A learned position table: a GPT's but without positions or with RoPE (-nope, -nemotron), a -learned Llama's.
    table = "-learned" in preset or (not llama and "-nope" not in preset and "-nemotron" not in preset)
    if ("wpe" in before) != table:
        print(f"FAIL {preset} positions: wpe {'missing' if table else 'present'}")
        failures.append(f"{preset} positions")
    params = {k: v.clone().requires_grad_(True) for k, v in before.items()}
    loss = model_loss(params, tokens, targets, llama, n_layer, H, KV, 1e-5, 10000.0, masks, scaling,
                      squared_relu=squared_relu, rmsnorm=rmsnorm, rotary_dim=rotary_dim, interleaved=interleaved,
                      rope=rope, no_rope=no_rope, window=window, window_layers=window_layers, off_by_one=off_by_one,
                      quick=quick, embed_scale=embed_scale, norm_1p=norm_1p, exact_gelu=exact_gelu,
                      gpt_rope=gpt_rope)
    check(f"{preset} loss", grads["_loss"], loss.detach().reshape(1), 1e-5, 0)
    loss.backward()
    for name, p in params.items():
        ref = p.grad
        check(f"{preset} grad {name}", grads[name], ref, 1e-4 * ref.abs().max().item() + 1e-8, 0)
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in params.values()]))
    check(f"{preset} grad norm", grads["_grad_norm"], norm.reshape(1), 0, 1e-4)
    # PyTorch's clipping and AdamW step from our gradients, so that the step is judged on its own: a gradient
    # within the tolerance above but as small as its error (a sum that cancels, |g| ~ 1e-7 beside 1e-4 of 4e-3)
    # has a first AdamW step g / (|g| + eps) of any size up to lr, which took a weight 1.7e-5 from PyTorch's on
    # an AVX-512 machine's OpenBLAS.
    for name, p in params.items():
        p.grad = grads[name].reshape(p.shape).clone()
    torch.nn.utils.clip_grad_norm_(list(params.values()), 1.0)
    decay = [p for k, p in params.items() if p.dim() >= 2]
    no_decay = [p for k, p in params.items() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.999), eps=1e-8)
    opt.step()
    for name, p in params.items():
        check(f"{preset} updated {name}", after[name], p.detach(), 1e-5, 1e-4)


def main():
    exe, work = sys.argv[1], sys.argv[2]
    subprocess.run([exe, work], check=True)
    torch.manual_seed(0)
    check_ops(work)
    check_step(work, "gpt-tiny", False, 2, 4, 4)
    check_step(work, "llama-tiny", True, 2, 4, 2)
    # The same steps with hidden and attention dropout 0.1, PyTorch applying the masks srunway-train drew.
    check_step(work, "gpt-tiny-dropout", False, 2, 4, 4)
    check_step(work, "llama-tiny-dropout", True, 2, 4, 2)
    # Llama with biases on q, k and v (--add-qkv-bias, Qwen2's), drawn at random.
    check_step(work, "llama-tiny-qkv-bias", True, 2, 4, 2)
    # GPT with Megatron's --squared-relu.
    check_step(work, "gpt-tiny-squared-relu", False, 2, 4, 4, squared_relu=True)
    # GPT with Megatron's --no-bias-gelu-fusion: exact GELU (erf's), with dropout.
    check_step(work, "gpt-tiny-exact-gelu-dropout", False, 2, 4, 4, exact_gelu=True)
    # Nemotron's GPT, with dropout: RoPE over half of each head and no position table, no biases, 2 KV heads, squared
    # ReLU, norms 1 + weight, an output layer of its own.
    check_step(work, "gpt-tiny-nemotron-dropout", False, 2, 4, 2, squared_relu=True, rotary_dim=8, norm_1p=True,
               gpt_rope=True)
    # A Llama with a learned position table in place of RoPE (its gated FFN without --position-embedding-type rope,
    # Megatron's learned_absolute default).
    check_step(work, "llama-tiny-learned", True, 2, 4, 2, rope=False)
    # Megatron's --qk-layernorm: RMSNorm on each head's q and k for the Llama (Qwen3's), LayerNorm for the GPT.
    check_step(work, "llama-tiny-qk-norm", True, 2, 4, 2)
    check_step(work, "gpt-tiny-qk-norm", False, 2, 4, 4)
    # Megatron's --kv-channels: heads wider than hidden / heads (with the norms, as Qwen3-0.6B's), and narrower.
    check_step(work, "llama-tiny-qk-norm-kv32", True, 2, 4, 2)
    check_step(work, "gpt-tiny-kv8", False, 2, 4, 4)
    # Megatron's --normalization apart from the architecture: a Llama with LayerNorms (biases included, with its q
    # and k norms too), as Megatron's Llama 3 scripts build one, and a GPT with RMSNorms.
    check_step(work, "llama-tiny-qk-norm-layernorm", True, 2, 4, 2, rmsnorm=False)
    check_step(work, "gpt-tiny-rmsnorm", False, 2, 4, 4, rmsnorm=True)
    # Megatron's --rotary-percent 0.25: RoPE over the first 4 of each head's 16 dimensions.
    check_step(work, "llama-tiny-rotary0.25", True, 2, 4, 2, rotary_dim=4)
    # LongRoPE (Phi-3's, from a Hugging Face config): the step's 32 positions past 16 original ones, its long factors.
    check_step(work, "llama-tiny-longrope", True, 2, 4, 2,
               scaling={"rope_type": "longrope", "short_factor": [1.0] * 8,
                        "long_factor": [1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 13.0, 21.0],
                        "original_max_position_embeddings": 16, "attention_factor": 1.2})
    # Megatron's --rotary-interleaved: RoPE's pairs side by side.
    check_step(work, "llama-tiny-interleaved", True, 2, 4, 2, interleaved=True)
    # Megatron's --position-embedding-type none: a GPT without its position table, a Llama without RoPE.
    check_step(work, "gpt-tiny-nope", False, 2, 4, 4)
    check_step(work, "llama-tiny-nope", True, 2, 4, 2, rope=False)
    # Megatron's --no-rope-freq: the Llama's second layer without RoPE (Llama 4 skips it in every fourth).
    check_step(work, "llama-tiny-no-rope-freq2", True, 2, 4, 2, no_rope=[0, 1])
    # Megatron's --window-size 5,0: each query sees itself and the 5 keys before, in every layer of the GPT and in the
    # Llama's first (--window-attn-skip-freq 2: the second attends to every key before).
    check_step(work, "gpt-tiny-window5", False, 2, 4, 4, window=5)
    check_step(work, "llama-tiny-window5-skip2", True, 2, 4, 2, window=5, window_layers=[1, 0])
    # Megatron's --softmax-type: off-by-one (a sink of score 0) for the GPT; learnable for the Llama, its sinks' scores
    # drawn N(0, 1) and their gradients judged as every parameter's, with dropout (the sink is not dropped).
    check_step(work, "gpt-tiny-off-by-one", False, 2, 4, 4, off_by_one=True)
    check_step(work, "llama-tiny-learnable-dropout", True, 2, 4, 2)
    # Megatron's --quick-geglu --glu-linear-offset 1 --activation-func-clamp-value 0.1 (gpt-oss's activation, with a
    # clamp the tiny model's FFN inputs cross both ways).
    check_step(work, "llama-tiny-quick-geglu", True, 2, 4, 2, quick=(1.702, 1.0, 0.1))
    # Gemma's Llama: --geglu, --embedding-multiplier 8 (the square root of its 64 wide hidden state),
    # --apply-layernorm-1p (norms times 1 + weight, as Gemma's RMSNorm) and its head tied to the embedding (Llama's
    # flags without --untie-embeddings-and-output-weights), which the multiplier does not scale.
    check_step(work, "llama-tiny-tied-gemma", True, 2, 4, 2, quick=("gelu", 0.0, None), embed_scale=8.0,
               norm_1p=True)
    # A GPT with --untie-embeddings-and-output-weights, an output layer of its own, with dropout.
    check_step(work, "gpt-tiny-untied-dropout", False, 2, 4, 4)
    # Megatron's --position-embedding-type yarn --yarn-rotary-scaling-factor 4 --yarn-original-max-position-embeddings
    # 64: YaRN's ramp over the head's pairs 0 to 3, q and k times 1.139.
    check_step(work, "llama-tiny-yarn", True, 2, 4, 2,
               scaling=dict(YARN, rotary_scaling_factor=4.0, original_max_position_embeddings=64))
    # Llama's flags without --disable-bias-linear (Megatron's add_bias_linear): a bias on every linear layer, drawn at
    # random, with dropout.
    check_step(work, "llama-tiny-biases-dropout", True, 2, 4, 2)
    if failures:
        print(f"{len(failures)} checks failed: {', '.join(failures)}")
        sys.exit(1)
    print("every op and the thirty training steps (GPT and Llama, with and without dropout; Llama with q, k and v "
          "biases; GPT with squared ReLU, with exact GELU and dropout, as Nemotron's (RoPE, no biases, GQA); Llama with"
          " learned positions; both with q and k norms; both with heads of another width; both with the other's norms; "
          "Llama with RoPE over a quarter of each head, with interleaved pairs, and in its first layer only; both "
          "without positions; both with a sliding window, the Llama's in its first layer only; GPT with an off-by-one "
          "softmax, Llama with learned sinks and dropout, Llama with quick GEGLU, Llama as Gemma's (GeGLU, its "
          "embedding scaled, norms 1 + weight, its head tied), GPT with a head of its own and dropout, Llama with YaRN,"
          " with LongRoPE, Llama with every bias and dropout) match PyTorch")


if __name__ == "__main__":
    main()
