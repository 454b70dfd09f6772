#!/usr/bin/python3
"""srunway-train --load of Hugging Face GPT-2 and Llama-family weights (Llama, Qwen2, Qwen3, Mistral, Phi-3, GLM,
StableLM, Gemma) and Nemotron's, and --export-hf, judged by PyTorch.

Usage: hf_weights.py SRUNWAY_TRAIN SRUNWAY_PREP WORK_DIR

Random tiny models are written as the Hugging Face hub holds them (names, GPT-2's Conv1D [in, out] weights, the
attention-mask buffers, F32/BF16/F16, a model in two files with its index, config.json). srunway-train loads each
with --skip-train and --export, and the loss of its export in our layout (torch_reference.model_loss, the function
tests/unit/trainer/torch_reference.py holds equal to srunway-train's own forward) must equal, within 1e-5, the loss
of a forward written here the way Hugging Face's GPT2LMHeadModel and LlamaForCausalLM compute it. Then: training
from the Hugging Face file gives the step lines of training from our own export of it; the model can come from
config.json (--use-checkpoint-args); what --export-hf writes gives our model's loss through the same Hugging Face
forwards, and loads back bit for bit; and bad files or flags are one error line with the documented exit code.
"""
import functools
import json
import math
import os
import re
import shutil
import subprocess
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_reference import load, model_loss, scaled_inv_freq  # noqa: E402

failures = []
TRAIN, PREP, WORK = sys.argv[1:4]
LAYERS, C, HEADS, KV, FFN, VOCAB, SEQ = 2, 64, 4, 2, 176, 512, 128


def save(path, tensors, dtype="F32"):
    """A safetensors file: u64 header length, JSON header, the tensors' bytes (little-endian)."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.contiguous()
        if dtype == "BF16":
            blob = t.to(torch.bfloat16).view(torch.int16).numpy().tobytes()
        elif dtype == "F16":
            blob = t.to(torch.float16).numpy().tobytes()
        else:
            blob = t.to(torch.float32).numpy().tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + b"".join(blobs))


def rounded(tensors, dtype):
    """What a file of `dtype` holds of `tensors`, back in fp32."""
    if dtype == "F32":
        return tensors
    kind = torch.bfloat16 if dtype == "BF16" else torch.float16
    return {k: v.to(kind).to(torch.float32) for k, v in tensors.items()}


def gpt2_weights(gen, layers=LAYERS, positions=SEQ, prefix=""):
    r = lambda *shape: torch.randn(*shape, generator=gen) * 0.2  # noqa: E731
    sd = {"wte.weight": r(VOCAB, C), "wpe.weight": r(positions, C)}
    for l in range(layers):
        h = f"h.{l}."
        sd.update({h + "ln_1.weight": 1 + r(C), h + "ln_1.bias": r(C),
                   h + "attn.c_attn.weight": r(C, 3 * C), h + "attn.c_attn.bias": r(3 * C),
                   h + "attn.c_proj.weight": r(C, C), h + "attn.c_proj.bias": r(C),
                   h + "ln_2.weight": 1 + r(C), h + "ln_2.bias": r(C),
                   h + "mlp.c_fc.weight": r(C, 4 * C), h + "mlp.c_fc.bias": r(4 * C),
                   h + "mlp.c_proj.weight": r(4 * C, C), h + "mlp.c_proj.bias": r(C)})
    sd.update({"ln_f.weight": 1 + r(C), "ln_f.bias": r(C)})
    return {prefix + k: v for k, v in sd.items()}


def gpt2_loss(sd, tokens, targets, layers=LAYERS, relu2=False, exact=False):
    """GPT2LMHeadModel's forward: Conv1D is x @ W + b, heads split q | k | v, tanh GELU (relu(x)^2 with `relu2`,
    its activation_function relu2; exact GELU with `exact`, its gelu), head tied to wte unless sd has its own
    lm_head.weight."""
    B, T = tokens.shape
    hd = C // HEADS
    x = sd["wte.weight"][tokens] + sd["wpe.weight"][:T][None]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for l in range(layers):
        h = f"h.{l}."
        a = F.layer_norm(x, (C,), sd[h + "ln_1.weight"], sd[h + "ln_1.bias"], 1e-5)
        q, k, v = (a @ sd[h + "attn.c_attn.weight"] + sd[h + "attn.c_attn.bias"]).split(C, dim=2)
        q, k, v = (t.view(B, T, HEADS, hd).transpose(1, 2) for t in (q, k, v))
        att = ((q @ k.transpose(-1, -2)) / math.sqrt(hd)).masked_fill(~causal, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ sd[h + "attn.c_proj.weight"] + sd[h + "attn.c_proj.bias"]
        m = F.layer_norm(x, (C,), sd[h + "ln_2.weight"], sd[h + "ln_2.bias"], 1e-5)
        m = m @ sd[h + "mlp.c_fc.weight"] + sd[h + "mlp.c_fc.bias"]
        m = F.relu(m) ** 2 if relu2 else F.gelu(m) if exact else F.gelu(m, approximate="tanh")
        x = x + m @ sd[h + "mlp.c_proj.weight"] + sd[h + "mlp.c_proj.bias"]
    x = F.layer_norm(x, (C,), sd["ln_f.weight"], sd["ln_f.bias"], 1e-5)
    head = sd.get("lm_head.weight", sd["wte.weight"])
    return F.cross_entropy((x @ head.T).reshape(-1, VOCAB), targets.reshape(-1))


def llama_weights(gen, tied=False, qkv_bias=False, qk_norm=False, hd=C // HEADS, biases=False):
    """A Llama's state dict; with `qkv_bias`, a Qwen2's (biases on q, k and v); with `qk_norm`, a Qwen3's (an
    RMSNorm on each head's q and k); its heads `hd` wide; with `biases`, a bias on every linear layer (a Llama's
    attention_bias and mlp_bias)."""
    r = lambda *shape: torch.randn(*shape, generator=gen) * 0.2  # noqa: E731
    sd = {"model.embed_tokens.weight": r(VOCAB, C)}
    for l in range(LAYERS):
        p = f"model.layers.{l}."
        sd.update({p + "input_layernorm.weight": 1 + r(C),
                   p + "self_attn.q_proj.weight": r(HEADS * hd, C), p + "self_attn.k_proj.weight": r(KV * hd, C),
                   p + "self_attn.v_proj.weight": r(KV * hd, C), p + "self_attn.o_proj.weight": r(C, HEADS * hd),
                   p + "self_attn.rotary_emb.inv_freq": torch.ones(hd // 2),
                   p + "post_attention_layernorm.weight": 1 + r(C),
                   p + "mlp.gate_proj.weight": r(FFN, C), p + "mlp.up_proj.weight": r(FFN, C),
                   p + "mlp.down_proj.weight": r(C, FFN)})
        if qkv_bias or biases:
            sd.update({p + "self_attn.q_proj.bias": r(HEADS * hd), p + "self_attn.k_proj.bias": r(KV * hd),
                       p + "self_attn.v_proj.bias": r(KV * hd)})
        if biases:
            sd.update({p + "self_attn.o_proj.bias": r(C), p + "mlp.gate_proj.bias": r(FFN),
                       p + "mlp.up_proj.bias": r(FFN), p + "mlp.down_proj.bias": r(C)})
        if qk_norm:
            sd.update({p + "self_attn.q_norm.weight": 1 + r(hd), p + "self_attn.k_norm.weight": 1 + r(hd)})
    sd["model.norm.weight"] = 1 + r(C)
    if not tied:
        sd["lm_head.weight"] = r(VOCAB, C)
    return sd


def hf_yarn(hd, theta, rs, max_positions):
    """transformers' YaRN (its _compute_yarn_parameters) for config.json's rope_scaling `rs`: the frequencies and the
    attention factor that multiplies cos and sin. Without a factor, max_position_embeddings over the original
    positions; without those, max_position_embeddings; the attention factor given, else m(mscale) / m(mscale_all_dim)
    only where both are non-zero, else m(1)."""
    original = rs.get("original_max_position_embeddings") or max_positions
    factor = rs.get("factor")
    if factor is None:
        factor = max_positions / original

    def m(a=1):
        return 1.0 if factor <= 1 else 0.1 * a * math.log(factor) + 1.0

    attention = rs.get("attention_factor")
    if attention is None:
        mscale, mscale_all_dim = rs.get("mscale"), rs.get("mscale_all_dim")
        attention = m(mscale) / m(mscale_all_dim) if mscale and mscale_all_dim else m()

    def dim_of(rotations):
        return hd * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low, high = dim_of(rs.get("beta_fast") or 32), dim_of(rs.get("beta_slow") or 1)
    if rs.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, hd - 1)
    if low == high:
        high += 0.001
    extrapolation = 1 - ((torch.arange(hd // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    powers = theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd)
    return 1.0 / (factor * powers) * (1 - extrapolation) + 1.0 / powers * extrapolation, attention


def hf_longrope(dim, theta, rs, T, original):
    """transformers' LongRoPE (its _compute_longrope_parameters, and longrope_frequency_update's switch on the
    sequence's length T) for Phi-3's config.json, whose rope_scaling is `rs` and original_max_position_embeddings
    `original`: the frequencies and the attention factor that multiplies cos and sin."""
    factor = SEQ / original
    attention = rs.get("attention_factor")
    if attention is None:
        attention = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(original))
    ext = torch.tensor(rs["long_factor"] if T > original else rs["short_factor"], dtype=torch.float32)
    return 1.0 / (ext * theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim)), attention


def llama_loss(sd, tokens, targets, theta=10000.0, eps=1e-5, scaling=None, sliding_window=None, window_layers=None,
               partial=1.0, original=None, interleaved=False, gemma=False, nemotron=False):
    """LlamaForCausalLM's forward: rotate_half RoPE on q and k (`scaling`: config.json's rope_scaling, rope_type
    llama3, linear or yarn, with max_position_embeddings SEQ), grouped KV heads repeated, SwiGLU, RMSNorm;
    Phi3ForCausalLM's with `partial` (partial_rotary_factor): RoPE over each head's first int(hd * partial) values,
    its frequencies over those, the rest passed (Phi3's apply_rotary_pos_emb; its fused tensors: phi3_weights), and
    its LongRoPE where `scaling` is of rope_type longrope or su (`original`: its original_max_position_embeddings);
    StableLmForCausalLM's where `sd` has the norms' biases (LayerNorms); GlmForCausalLM's with `interleaved` too:
    the turned pairs (2i, 2i + 1), cos and sin's first half each repeated in place (GLM's apply_rotary_pos_emb and
    rotate_half; its fused gate and up: glm_weights); MistralForCausalLM's with a `sliding_window` (transformers'
    mask: query i sees key j where i - window < j <= i; in the layers `window_layers` marks 1, all if None, as Qwen2's
    and Qwen3's layer_types); Qwen2ForCausalLM's where q, k and v have biases; Qwen3ForCausalLM's where q_norm and
    k_norm are (each head's q and k RMS-normed, before RoPE); any other linear layer's bias where `sd` has it
    (attention_bias, mlp_bias); GemmaForCausalLM's with `gemma`: the embedding times sqrt(hidden_size) (its
    GemmaTextScaledWordEmbedding), RMSNorms times 1 + weight (GemmaRMSNorm) and GELU's tanh approximation in place of
    SiLU (hidden_act gelu_pytorch_tanh); NemotronForCausalLM's with `nemotron`: LayerNorms times 1 + weight
    (NemotronLayerNorm1P, biases included) and an MLP of one up_proj, squared ReLU (relu2), down_proj."""
    B, T = tokens.shape
    hd = sd["model.layers.0.self_attn.q_proj.weight"].shape[0] // HEADS  # head_dim

    def rms(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1 + w if gemma else w)

    def norm(x, name):  # StableLM's LayerNorms where `sd` has their biases (Nemotron's 1 + weight), else RMSNorm
        if name + ".bias" in sd:
            weight = sd[name + ".weight"] + (1 if nemotron else 0)
            return F.layer_norm(x, (x.shape[-1],), weight, sd[name + ".bias"], eps)
        return rms(x, sd[name + ".weight"])

    act = (lambda g: F.gelu(g, approximate="tanh")) if gemma else F.silu  # noqa: E731

    def rotate_half(x):
        half = x.shape[-1] // 2
        return torch.cat([-x[..., half:], x[..., :half]], dim=-1)

    dim = int(hd * partial)
    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    attention = 1.0
    if scaling is not None and scaling.get("rope_type", scaling.get("type")) in ("longrope", "su"):
        inv_freq, attention = hf_longrope(dim, theta, scaling, T, original)
    elif scaling is not None and scaling.get("rope_type", scaling.get("type")) == "yarn":
        inv_freq, attention = hf_yarn(dim, theta, scaling, SEQ)
    elif scaling is not None:
        inv_freq = scaled_inv_freq(inv_freq, scaling)
    freqs = torch.outer(torch.arange(T, dtype=torch.float32), inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)
    cos, sin = (emb.cos() * attention)[None, None], (emb.sin() * attention)[None, None]
    full = torch.ones(T, T, dtype=torch.bool).tril()
    windowed = full.clone()
    if sliding_window is not None:
        i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
        windowed &= j > i - sliding_window
    x = sd["model.embed_tokens.weight"][tokens]
    if gemma:
        x = x * torch.tensor(C ** 0.5)
    for l in range(LAYERS):
        p = f"model.layers.{l}."
        causal = windowed if window_layers is None or window_layers[l] else full
        a = norm(x, p + "input_layernorm")
        q, k, v = (F.linear(a, sd[f"{p}self_attn.{n}_proj.weight"], sd.get(f"{p}self_attn.{n}_proj.bias"))
                   .view(B, T, heads, hd).transpose(1, 2) for n, heads in (("q", HEADS), ("k", KV), ("v", KV)))
        if p + "self_attn.q_norm.weight" in sd:
            q, k = rms(q, sd[p + "self_attn.q_norm.weight"]), rms(k, sd[p + "self_attn.k_norm.weight"])
        if interleaved:
            c2, s2 = (t[..., : t.shape[-1] // 2].repeat_interleave(2, dim=-1) for t in (cos, sin))
            pairs = lambda x: torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)  # noqa: E731
            q, k = (torch.cat([x[..., :dim] * c2 + pairs(x[..., :dim]) * s2, x[..., dim:]], -1) for x in (q, k))
        else:
            q, k = (torch.cat([x[..., :dim] * cos + rotate_half(x[..., :dim]) * sin, x[..., dim:]], -1)
                    for x in (q, k))
        k, v = k.repeat_interleave(HEADS // KV, dim=1), v.repeat_interleave(HEADS // KV, dim=1)
        att = ((q @ k.transpose(-1, -2)) / math.sqrt(hd)).masked_fill(~causal, float("-inf")).softmax(-1)
        def linear(x, name):
            return F.linear(x, sd[f"{p}{name}.weight"], sd.get(f"{p}{name}.bias"))

        x = x + linear((att @ v).transpose(1, 2).reshape(B, T, HEADS * hd), "self_attn.o_proj")
        m = norm(x, p + "post_attention_layernorm")
        if nemotron:
            x = x + linear(F.relu(linear(m, "mlp.up_proj")) ** 2, "mlp.down_proj")
        else:
            x = x + linear(act(linear(m, "mlp.gate_proj")) * linear(m, "mlp.up_proj"), "mlp.down_proj")
    x = norm(x, "model.norm")
    head = sd.get("lm_head.weight", sd["model.embed_tokens.weight"])
    return F.cross_entropy((x @ head.T).reshape(-1, VOCAB), targets.reshape(-1))


def train(*args, data=None):
    """srunway-train on one rank, on mock data or the dataset `data`: (exit code, stdout, stderr)."""
    source = ["--data-path", data] if data else ["--mock-data"]
    run = subprocess.run([TRAIN, *source, "--seq-length", "32", "--micro-batch-size", "2",
                          "--peak-tflops", "1", "--threads", "1", *args], capture_output=True, text=True, timeout=120)
    return run.returncode, run.stdout, run.stderr


def check(what, ok, detail="", always=False):
    """`detail` is printed on failure (and with `always`, on success too)."""
    shown = detail if detail and (always or not ok) else ""
    print(f"{'ok  ' if ok else 'FAIL'} {what}{': ' + shown if shown else ''}")
    if not ok:
        failures.append(what)


def exported_loss(path, preset_args, tokens, targets, llama, scaling=None):
    """Loads `path` into srunway-train, exports it, and returns the export's loss in our layout (`scaling` "header":
    RoPE as the export's header records it: its base, the share of each head it turns and its scaling (YaRN as
    Megatron computes it), and attention through the window it records, if any)."""
    out = os.path.join(WORK, "export.safetensors")
    if os.path.exists(out):
        os.remove(out)
    rc, _, err = train(*preset_args, "--load", path, "--skip-train", "--eval-iters", "0", "--export", out)
    if rc != 0:
        check(f"srunway-train --skip-train --load {os.path.basename(path)}", False, err.strip()[-400:])
        return None
    ours = load(out)
    window = window_layers = rotary_dim = model = None
    theta = 10000.0
    if scaling == "header":
        model = exported_model(out)
        scaling = ({"rope_type": "yarn", **model["yarn"]} if model.get("yarn") else
                   {"rope_type": "longrope", **model["longrope"]} if model.get("longrope") else
                   {"rope_type": "llama3", **model["rope_scaling"]} if model.get("rope_scaling") else
                   {"rope_type": "linear", "factor": model["rope_linear_factor"]}
                   if model.get("rope_linear_factor", 1) != 1 else None)
        window = model["window_size"][0] if model.get("window_size") else None
        window_layers = model.get("window_attn_skip_freq") or None
        theta = model["rope_theta"]
        hd = ours["layers.0.qkv.weight"].shape[0] // (HEADS + 2 * model["n_kv_head"])
        rotary_dim = int(hd * model["rotary_percent"]) if model.get("rotary_percent", 1) != 1 else None
    model = model or {}
    return model_loss(ours, tokens, targets, llama, LAYERS, HEADS, model.get("n_kv_head", KV if llama else HEADS),
                      1e-5, theta,
                      scaling=scaling, window=window, window_layers=window_layers, rotary_dim=rotary_dim,
                      interleaved=model.get("rotary_interleaved", False),
                      rmsnorm=model["normalization"] == "RMSNorm" if model else None,
                      quick=("gelu", 0.0, None) if model.get("geglu") else None,
                      embed_scale=model.get("embedding_multiplier", 1.0),
                      norm_1p=model.get("apply_layernorm_1p", False),
                      exact_gelu=model.get("exact_gelu", False), squared_relu=model.get("squared_relu", False),
                      gpt_rope=not llama and model.get("position_embedding_type") in ("rope", "yarn")).item(), err


def compare(what, path, preset_args, reference, tokens, targets, llama, scaling=None):
    got = exported_loss(path, preset_args, tokens, targets, llama, scaling)
    if got is None:
        return None
    loss, log = got
    check(what, abs(loss - reference) <= 1e-5, f"srunway {loss:.6f}, Hugging Face's forward {reference:.6f}",
          always=True)
    return log


def export_hf(source, out):
    """--export-hf of the model in the folder `source` (its config.json's) to `out`: (exit code, stderr, the
    config.json written and the tensors, empty where it failed)."""
    rc, _, err = train("--use-checkpoint-args", "--load", source, "--skip-train", "--eval-iters", "0", "--export-hf",
                       out)
    if rc != 0:
        return rc, err, {}, {}
    with open(os.path.join(out, "config.json")) as f:
        return rc, err, json.load(f), load(os.path.join(out, "model.safetensors"))


def export_hf_rope_scaling(source, out):
    """export_hf's exit code, stderr and the rope_scaling of the config.json written (None if none was)."""
    rc, err, written, _ = export_hf(source, out)
    return rc, err, written.get("rope_scaling")


def error_lines(err):
    return [line for line in err.splitlines() if " error: " in line]


def expect_error(what, args, code, pattern):
    rc, _, err = train(*args)
    lines = error_lines(err)
    check(what, rc == code and len(lines) == 1 and re.search(pattern, lines[0]) is not None,
          f"exit {rc}, error lines {lines}")


def exported_model(path):
    """The model that --export's header records."""
    with open(path, "rb") as f:
        header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
    return json.loads(header.get("__metadata__", {}).get("srunway_model", "{}"))


def bare_folder(name, sd):
    """WORK/name holding `sd` as model.safetensors and no config.json."""
    folder = os.path.join(WORK, name)
    os.makedirs(folder, exist_ok=True)
    save(os.path.join(folder, "model.safetensors"), sd)
    return folder


def check_llama_variant(name, sd, flag, own, missing, config, tokens, targets, llama):
    """A Llama variant's file (Qwen2's, Qwen3's) whose tensors that `own` (a test on names) picks a plain Llama lacks:
    they change Hugging Face's loss here; with `flag` (or flags) the file loads to the same loss, and without is refused
    (`missing`: a pattern of the error); with `config` as its config.json it loads to the same loss alone
    (--use-checkpoint-args). Returns the folder of the file."""
    folder = os.path.join(WORK, name.lower())
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.safetensors")
    save(path, sd)
    reference = llama_loss(sd, tokens, targets).item()
    without = llama_loss({k: v for k, v in sd.items() if not own(k)}, tokens, targets).item()
    check(f"{name}'s own tensors change Hugging Face's loss here", abs(reference - without) > 1e-3,
          f"{reference:.6f} with them, {without:.6f} without", always=True)
    flags = flag if isinstance(flag, list) else [flag]
    compare(f"{name} with {' '.join(flags)}", path, [*llama, *flags], reference, tokens, targets, True)
    expect_error(f"{name}'s weights without {' '.join(flags)}", [*llama, "--load", path, "--finetune"], 1, missing)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)
    compare(f"{name} from its config.json (--use-checkpoint-args)", folder, ["--use-checkpoint-args"], reference,
            tokens, targets, True)
    return folder


def refused_config(name, folder, config, key, value, pattern):
    """`config` with `key` set to `value` as the config.json in `folder` is refused: `pattern`."""
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({**config, key: value}, f)
    expect_error(f"a {name} config.json with {key} {value}", ["--use-checkpoint-args", "--load", folder, "--finetune"],
                 1, r"config\.json: " + pattern)


def check_qwen2(gen, tokens, targets, llama):
    """Qwen2 (Llama with biases on q, k and v): its files take --add-qkv-bias, or config.json's model_type qwen2."""
    sd = llama_weights(gen, tied=True, qkv_bias=True)  # as Qwen2's smaller models, the head tied
    config = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "num_hidden_layers": LAYERS,
              "hidden_size": C, "num_attention_heads": HEADS, "num_key_value_heads": KV, "intermediate_size": FFN,
              "max_position_embeddings": SEQ, "vocab_size": VOCAB, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
              "hidden_act": "silu", "tie_word_embeddings": True, "use_sliding_window": False,
              "sliding_window": 4096, "max_window_layers": 21, "attention_dropout": 0.0}
    missing = r"6 tensors the model has no place for \(model\.layers\.0\.self_attn\.k_proj\.bias, "
    folder = check_llama_variant("Qwen2", sd, "--add-qkv-bias", lambda k: k.endswith(".bias"), missing, config, tokens,
                                 targets, llama)
    check_qwen_window(folder, config, sd, tokens, targets)


def check_qwen_window(folder, config, sd, tokens, targets):
    """Qwen2's sliding window (use_sliding_window true): sliding_window W in the layers from max_window_layers on, or
    in those layer_types names sliding_attention; the loss is Hugging Face's forward's with its mask in those layers;
    --export-hf writes both keys back and it loads back; a window before a layer without it has no export."""
    unwindowed = llama_loss(sd, tokens, targets).item()
    cases = [("from max_window_layers 1 on", {"max_window_layers": 1}, [0, 1]),
             ("from max_window_layers 2 on: none", {"max_window_layers": 2}, [0, 0]),
             ("in layer_types' first", {"max_window_layers": 1, "layer_types": ["sliding_attention", "full_attention"]},
              [1, 0])]
    for what, keys, layers in cases:
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump({**config, "use_sliding_window": True, "sliding_window": 8, **keys}, f)
        reference = llama_loss(sd, tokens, targets, sliding_window=8, window_layers=layers).item()
        check(f"Qwen2's window {what}: Hugging Face's loss {'unchanged' if not any(layers) else 'changed'}",
              (abs(reference - unwindowed) > 1e-3) == any(layers), f"{reference:.6f}, {unwindowed:.6f} without",
              always=True)
        compare(f"Qwen2 with a sliding window {what}", folder, ["--use-checkpoint-args"], reference, tokens, targets,
                True, "header")
        out = os.path.join(WORK, "hf-qwen2-window")
        rc, _, err = train("--use-checkpoint-args", "--load", folder, "--skip-train", "--eval-iters", "0",
                           "--export-hf", out)
        if layers == [1, 0]:
            lines = error_lines(err)
            check(f"--export-hf of Qwen2 with a window {what}: refused", rc == 1 and len(lines) == 1 and re.search(
                r"transformers' Qwen2 and Qwen3 attend through the window in the layers from max_window_layers on, "
                r"and this model in others too \(--window-attn-skip-freq\): --export writes its weights$", lines[0])
                  is not None, f"exit {rc}, {lines}")
            continue
        written = {}
        if rc == 0:
            with open(os.path.join(out, "config.json")) as f:
                written = json.load(f)
        want = ({"use_sliding_window": True, "sliding_window": 8, "max_window_layers": 1,
                 "layer_types": ["full_attention", "sliding_attention"]} if any(layers)
                else {"use_sliding_window": False})
        check(f"--export-hf of Qwen2 with a window {what}: config.json's window",
              rc == 0 and all(written.get(k) == v for k, v in want.items()), f"exit {rc}, {written} {err[-300:]}")
        if rc == 0:
            compare(f"--export-hf of Qwen2 with a window {what} loaded back", out, ["--use-checkpoint-args"],
                    reference, tokens, targets, True, "header")
    refused_config("Qwen2", folder, {**config, "use_sliding_window": True, "sliding_window": 8}, "layer_types",
                   ["sliding_attention", "chunked_attention"],
                   r"layer_types has 'chunked_attention': srunway-train's layers attend through the window "
                   r"\(sliding_attention\) or to every key \(full_attention\)$")


def check_mistral(sd, llama_config, tokens, targets):
    """Mistral (a Llama with a sliding window): config.json's model_type mistral with sliding_window W is a Llama whose
    queries see W keys, themselves included (--window-size W-1,0), and with none (Mistral 7B v0.2 on) a Llama; the
    loss of each is Hugging Face's forward's; sliding_window 0 is refused; --export-hf writes it back as Mistral and
    it loads back; a window in some layers only, or beside biases, is refused there."""
    folder = os.path.join(WORK, "mistral")
    os.makedirs(folder, exist_ok=True)
    sd = {**sd, "lm_head.weight": sd["model.embed_tokens.weight"].flip(0)}  # Mistral's head is its own
    save(os.path.join(folder, "model.safetensors"), sd)
    config = {**{k: v for k, v in llama_config.items() if k != "rope_scaling"}, "model_type": "mistral",
              "architectures": ["MistralForCausalLM"], "hidden_act": "silu", "rope_theta": 10000.0,
              "attention_dropout": 0.0, "tie_word_embeddings": False}
    unwindowed = llama_loss(sd, tokens, targets).item()
    for window in (None, 8):
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump({**config, "sliding_window": window}, f)
        reference = llama_loss(sd, tokens, targets, sliding_window=window).item()
        if window is not None:
            check("a sliding window of 8 changes Hugging Face's loss here", abs(reference - unwindowed) > 1e-3,
                  f"{reference:.6f} with it, {unwindowed:.6f} without", always=True)
        compare(f"Mistral with sliding_window {window}", folder, ["--use-checkpoint-args"], reference, tokens, targets,
                True, "header")
    refused_config("Mistral", folder, config, "sliding_window", 0,
                   r"sliding_window must be positive \(or null: none\), got 0$")
    # Out and back.
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({**config, "sliding_window": 8}, f)
    out = os.path.join(WORK, "hf-mistral")
    rc, _, err = train("--use-checkpoint-args", "--load", folder, "--skip-train", "--eval-iters", "0", "--export-hf",
                       out)
    written = {}
    if rc == 0:
        with open(os.path.join(out, "config.json")) as f:
            written = json.load(f)
    check("--export-hf of a Llama with a window: Mistral's config.json",
          rc == 0 and written.get("model_type") == "mistral" and written.get("sliding_window") == 8 and
          written.get("architectures") == ["MistralForCausalLM"] and "attention_bias" not in written,
          f"exit {rc}, {written} {err.strip()[-300:]}")
    if rc == 0:
        compare("--export-hf of a Llama with a window loaded back", out, ["--use-checkpoint-args"],
                llama_loss(sd, tokens, targets, sliding_window=8).item(), tokens, targets, True, "header")
    llama = ["--preset", "llama-tiny", "--window-size", "7,0", "--export-hf", os.path.join(WORK, "hf-mistral-no")]
    expect_error("--export-hf of a Llama with a window in some layers", [*llama, "--window-attn-skip-freq", "2"], 1,
                 r"--export-hf: transformers' Mistral, the Llama with a sliding window, has it in every layer and no "
                 r"biases, and this model attends through it in some layers only "
                 r"\(--window-attn-skip-freq\): --export writes its weights$")
    expect_error("--export-hf of a Llama with a window and every bias", [*llama, *EVERY_BIAS], 1,
                 r"--export-hf: transformers' Mistral, .* and this model has a bias on every linear layer \(Llama's "
                 r"flags without --disable-bias-linear\): --export writes its weights$")


def check_yarn(sd, llama_config, tokens, targets):
    """config.json's rope_scaling of rope_type yarn (Qwen's long-context configs, gpt-oss's) read as transformers
    reads it: the loaded model's loss, its RoPE computed from the YaRN numbers our header records as Megatron does,
    is Hugging Face's forward's; the attention factor by transformers' rule (mscale alone is not read); an
    attention_factor that Megatron's mscales cannot give is refused; --export-hf writes it and it loads back."""
    yarn_dir = os.path.join(WORK, "llama-yarn")
    os.makedirs(yarn_dir, exist_ok=True)
    save(os.path.join(yarn_dir, "model.safetensors"), sd)
    unscaled = llama_loss(sd, tokens, targets).item()
    m2 = 0.1 * 2 * math.log(4.0) + 1
    cases = [
        ("Qwen's", {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}),
        # transformers' older key; the factor from max_position_embeddings (128) over 32; the two mscales' ratio.
        ("without a factor, unrounded, both mscales",
         {"type": "yarn", "original_max_position_embeddings": 32, "beta_fast": 4.0, "beta_slow": 0.5,
          "truncate": False, "mscale": 1.0, "mscale_all_dim": 0.5}),
        ("mscale alone (not read)", {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64,
                                     "mscale": 2.0}),
        ("attention_factor given as mscale 2 gives it",
         {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64, "mscale": 2.0,
          "attention_factor": m2}),
    ]
    for what, rs in cases:
        with open(os.path.join(yarn_dir, "config.json"), "w") as f:
            json.dump({**llama_config, "rope_scaling": rs}, f)
        reference = llama_loss(sd, tokens, targets, scaling=rs).item()
        check(f"YaRN ({what}) changes Hugging Face's loss here", abs(reference - unscaled) > 1e-3,
              f"{reference:.6f} with it, {unscaled:.6f} without", always=True)
        compare(f"Llama with config.json's rope_scaling (yarn, {what})", yarn_dir, ["--use-checkpoint-args"],
                reference, tokens, targets, True, "header")
    with open(os.path.join(yarn_dir, "config.json"), "w") as f:
        json.dump({**llama_config, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "attention_factor": 1.5}}, f)
    expect_error("a config.json with YaRN's attention_factor that Megatron's mscales do not give",
                 ["--use-checkpoint-args", "--load", yarn_dir, "--finetune"], 1,
                 r"config\.json: rope_scaling: attention_factor 1\.5: srunway-train's YaRN \(Megatron's\) scales "
                 r"attention by m\(mscale\) / m\(mscale_all_dim\), m\(a\) = 0\.1 a ln\(factor\) \+ 1, which is "
                 r"1\.138629\d* here$")
    # Out and back: mscale 2 alone, which transformers reads only through the attention_factor written beside it.
    with open(os.path.join(yarn_dir, "config.json"), "w") as f:
        json.dump({**llama_config, "rope_scaling": cases[3][1]}, f)
    out = os.path.join(WORK, "hf-llama-yarn")
    rc, err, written = export_hf_rope_scaling(yarn_dir, out)
    written = written or {}
    want = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64, "beta_fast": 32.0,
            "beta_slow": 1.0, "mscale": 2.0, "mscale_all_dim": 0.0, "truncate": True}
    check("--export-hf of a Llama with YaRN: config.json's rope_scaling",
          rc == 0 and {k: v for k, v in written.items() if k != "attention_factor"} == want and
          abs(written.get("attention_factor", 0) - m2) <= 1e-6, f"exit {rc}, {written} {err.strip()[-300:]}")
    if rc == 0:
        reference = llama_loss(sd, tokens, targets, scaling=cases[3][1]).item()
        loss = llama_loss(load(os.path.join(out, "model.safetensors")), tokens, targets, scaling=written).item()
        check("--export-hf of a Llama with YaRN: Hugging Face's loss", abs(loss - reference) <= 1e-5,
              f"{loss:.6f} vs {reference:.6f}")
        compare("--export-hf of a Llama with YaRN loaded back", out, ["--use-checkpoint-args"], reference, tokens,
                targets, True, "header")


def check_rope_parameters(sd, llama_config, tokens, targets):
    """transformers 5 writes RoPE's numbers in config.json's rope_parameters (rope_theta and rope_type with the
    scaling's keys), not rope_theta and rope_scaling beside the rest: read as it reads them (the base was once read
    as 10000 from such a file, silently); a rope_theta beside it that differs is refused, as transformers 4 and 5
    read the file apart; per layer type, the same RoPE for each or refused."""
    folder = os.path.join(WORK, "llama-rope-parameters")
    os.makedirs(folder, exist_ok=True)
    save(os.path.join(folder, "model.safetensors"), sd)
    scaling = llama_config["rope_scaling"]
    config = {k: v for k, v in llama_config.items() if k != "rope_scaling"}
    default = llama_loss(sd, tokens, targets).item()
    cases = [("rope_theta", {"rope_type": "default", "rope_theta": 500.0}, None),
             ("Llama 3.1's scaling", {**scaling, "rope_theta": 500.0}, scaling),
             ("per layer type, the same", {"full_attention": {"rope_type": "default", "rope_theta": 500.0},
                                           "sliding_attention": {"rope_type": "default", "rope_theta": 500.0}}, None)]
    for what, parameters, scaled in cases:
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump({**config, "rope_parameters": parameters}, f)
        reference = llama_loss(sd, tokens, targets, theta=500.0, scaling=scaled).item()
        check(f"rope_parameters ({what}) change Hugging Face's loss here", abs(reference - default) > 1e-3,
              f"{reference:.6f} with them, {default:.6f} without", always=True)
        compare(f"Llama with config.json's rope_parameters ({what})", folder, ["--use-checkpoint-args"], reference,
                tokens, targets, True, "header")
    # Beside it the same base is no conflict; another is.
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({**config, "rope_theta": 500, "rope_parameters": cases[0][1]}, f)
    compare("Llama with the same rope_theta in and beside rope_parameters", folder, ["--use-checkpoint-args"],
            llama_loss(sd, tokens, targets, theta=500.0).item(), tokens, targets, True, "header")
    refused_config("Llama", folder, {**config, "rope_parameters": cases[0][1]}, "rope_theta", 10000.0,
                   r"rope_parameters: rope_theta 500\.0 and 10000\.0 beside it differ: transformers 5 reads the first, "
                   r"older ones the second$")
    refused_config("Llama", folder, config, "rope_parameters",
                   {"full_attention": cases[0][1], "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}},
                   r"rope_parameters: full_attention's and sliding_attention's differ: srunway-train's layers turn "
                   r"one RoPE$")


def phi3_weights(sd):
    """A Llama's state dict as Phi-3's: q, k and v stacked in qkv_proj, gate and up in gate_up_proj."""
    out = dict(sd)
    for l in range(LAYERS):
        a, m = f"model.layers.{l}.self_attn.", f"model.layers.{l}.mlp."
        out[a + "qkv_proj.weight"] = torch.cat([out.pop(a + f"{n}_proj.weight") for n in "qkv"])
        out[m + "gate_up_proj.weight"] = torch.cat([out.pop(m + f"{n}_proj.weight") for n in ("gate", "up")])
    return out


def llama_weights_of_phi3(sd):
    """Phi-3's state dict as a Llama's (phi3_weights undone), its heads C // HEADS wide."""
    out = dict(sd)
    hd = C // HEADS
    for l in range(LAYERS):
        a, m = f"model.layers.{l}.self_attn.", f"model.layers.{l}.mlp."
        q, k, v = out.pop(a + "qkv_proj.weight").split([HEADS * hd, KV * hd, KV * hd])
        out.update({a + "q_proj.weight": q, a + "k_proj.weight": k, a + "v_proj.weight": v})
        gate, up = out.pop(m + "gate_up_proj.weight").chunk(2)
        out.update({m + "gate_proj.weight": gate, m + "up_proj.weight": up})
    return out


def check_longrope(folder, config, sd, tokens, targets):
    """Phi-3's LongRoPE (Phi-3-mini-128k's, Phi-3.5-mini's, Phi-4-mini's) as transformers turns it: the long factors in
    these 32 positions past 16 original ones, the short within 64; the attention factor derived, or given; a factor
    that transformers 4 and 5 would read apart is refused; --export-hf writes it back and it loads back."""
    plain = llama_loss(sd, tokens, targets).item()
    half = {"short_factor": [1.0, 1.5, 2.0, 4.0], "long_factor": [1.0, 3.0, 9.0, 27.0]}
    whole = {"short_factor": [1.0 + 0.25 * i for i in range(8)], "long_factor": [2.0 ** i for i in range(8)]}
    cases = [("long factors, half of each head", 0.5, 16, {"type": "longrope", **half}),
             ("short factors, whole heads, su", 1.0, 64, {"type": "su", **whole}),
             ("attention_factor given", 0.5, 16, {"type": "longrope", **half, "attention_factor": 1.5})]
    for what, partial, original, rs in cases:
        keys = {"partial_rotary_factor": partial, "original_max_position_embeddings": original, "rope_scaling": rs}
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump({**config, **keys}, f)
        reference = llama_loss(sd, tokens, targets, partial=partial, scaling=rs, original=original).item()
        check(f"LongRoPE ({what}) changes Hugging Face's loss here", abs(reference - plain) > 1e-3,
              f"{reference:.6f} with it, {plain:.6f} without", always=True)
        compare(f"Phi-3 with LongRoPE ({what})", folder, ["--use-checkpoint-args"], reference, tokens, targets, True,
                "header")
        # Out and back: rope_scaling as Phi-3's hub configs write it, the attention factor only where given.
        rc, err, written, exported = export_hf(folder, os.path.join(WORK, "hf-phi3-longrope"))
        want = {**rs, "type": "longrope"}
        check(f"--export-hf of a Phi-3 with LongRoPE ({what}): its config.json",
              rc == 0 and written.get("rope_scaling") == want and
              written.get("original_max_position_embeddings") == original and
              written.get("partial_rotary_factor") == partial, f"exit {rc}, {written} {err.strip()[-300:]}")
        if rc == 0:
            loss = llama_loss(llama_weights_of_phi3(exported), tokens, targets, partial=partial,
                              scaling=written["rope_scaling"], original=original).item()
            check(f"--export-hf of a Phi-3 with LongRoPE ({what}): Hugging Face's loss", abs(loss - reference) <= 1e-5,
                  f"{loss:.6f} vs {reference:.6f}")
    longrope = {"partial_rotary_factor": 0.5, "original_max_position_embeddings": 16}
    refused_config("Phi-3", folder, {**config, **longrope}, "rope_scaling", {"type": "longrope", **half, "factor": 4.0},
                   r"rope_scaling: factor 4 is not max_position_embeddings over the original positions, 8: "
                   r"transformers 4 reads that ratio, 5 the factor$")
    # A model the file describes that srunway-train does not build: the file named, exit 1 (a bad file, not a flag).
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({**config, **longrope, "rope_scaling": {"type": "longrope", **half, "short_factor": [1, 1, 2, -3]}},
                  f)
    expect_error("a Phi-3 config.json with a negative LongRoPE factor",
                 ["--use-checkpoint-args", "--load", folder, "--finetune"], 1,
                 r"error: --use-checkpoint-args: the model .*/phi3 holds: LongRoPE's short_factor must be positive and "
                 r"finite, and holds -3$")
    refused_config("Phi-3", folder, {**config, **longrope}, "rope_scaling",
                   {"type": "longrope", **half, "long_factor": [1.0, 3.0, 9.0]},
                   r"LongRoPE's long_factor holds 3 factors, and RoPE turns 4 pairs of each head$")


def check_phi3(gen, tokens, targets):
    """Phi-3 (a Llama with q, k, v in one tensor and gate, up in another, RoPE over partial_rotary_factor of each head
    and Mistral's window): its config.json and files load to Hugging Face's loss (LongRoPE: check_longrope);
    --export-hf writes a Llama that turns part of each head (--rotary-percent) as Phi-3, which loads back; one with
    what Phi-3 lacks is refused there."""
    folder = os.path.join(WORK, "phi3")
    os.makedirs(folder, exist_ok=True)
    sd = llama_weights(gen)
    save(os.path.join(folder, "model.safetensors"), phi3_weights(sd))
    config = {"model_type": "phi3", "architectures": ["Phi3ForCausalLM"], "num_hidden_layers": LAYERS,
              "hidden_size": C, "num_attention_heads": HEADS, "num_key_value_heads": KV, "intermediate_size": FFN,
              "max_position_embeddings": SEQ, "original_max_position_embeddings": SEQ, "vocab_size": VOCAB,
              "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "rope_scaling": None, "hidden_act": "silu",
              "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attention_dropout": 0.0, "tie_word_embeddings": False}
    whole = llama_loss(sd, tokens, targets).item()
    # Phi-3-mini's own: whole heads, a window past these 32 positions.
    for what, keys, partial, window in (("Phi-3-mini's window of 2047", {"sliding_window": 2047}, 1.0, None),
                                        ("half of each head turned, a window of 8",
                                         {"partial_rotary_factor": 0.5, "sliding_window": 8}, 0.5, 8)):
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump({**config, **keys}, f)
        reference = llama_loss(sd, tokens, targets, partial=partial, sliding_window=window).item()
        if partial != 1.0:
            check("half of each head turned and a window change Hugging Face's loss here",
                  abs(reference - whole) > 1e-3, f"{reference:.6f} with them, {whole:.6f} without", always=True)
        compare(f"Phi-3 ({what})", folder, ["--use-checkpoint-args"], reference, tokens, targets, True, "header")
    refused_config("Phi-3", folder, config, "rope_scaling", {"type": "linear", "factor": 2.0},
                   r"rope_scaling: rope_type 'linear': transformers' Phi3 turns plain RoPE \(default\) or LongRoPE "
                   r"\(longrope, su, yarn\)$")
    refused_config("Llama", folder, {**config, "model_type": "llama"}, "partial_rotary_factor", 0.5,
                   r"partial_rotary_factor is 0\.5: srunway-train's llama has 1\.0 \(phi3, glm and stablelm turn a "
                   r"share of each head\)$")
    # Out and back: Phi-3's config.json and fused tensors, Hugging Face's loss from them, and the same model again.
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({**config, "partial_rotary_factor": 0.5, "sliding_window": 8}, f)
    out = os.path.join(WORK, "hf-phi3")
    rc, err, written, exported = export_hf(folder, out)
    names = list(exported)
    check("--export-hf of a Llama turning half of each head: Phi-3's config.json and tensors",
          rc == 0 and written.get("model_type") == "phi3" and written.get("architectures") == ["Phi3ForCausalLM"] and
          written.get("partial_rotary_factor") == 0.5 and written.get("sliding_window") == 8 and
          "model.layers.0.self_attn.qkv_proj.weight" in names and "model.layers.1.mlp.gate_up_proj.weight" in names,
          f"exit {rc}, {written}, {names[:6]} {err.strip()[-300:]}")
    if rc == 0:
        reference = llama_loss(sd, tokens, targets, partial=0.5, sliding_window=8).item()
        loss = llama_loss(llama_weights_of_phi3(exported), tokens, targets, partial=written["partial_rotary_factor"],
                          sliding_window=written["sliding_window"]).item()
        check("--export-hf of a Llama turning half of each head: Hugging Face's loss", abs(loss - reference) <= 1e-5,
              f"{loss:.6f} vs {reference:.6f}")
        compare("--export-hf of a Llama turning half of each head loaded back", out, ["--use-checkpoint-args"],
                reference, tokens, targets, True, "header")
    check_longrope(folder, config, sd, tokens, targets)
    expect_error("--export-hf of a Llama turning half of each head with biases",
                 ["--preset", "llama-tiny", "--rotary-percent", "0.5", "--add-qkv-bias", "--export-hf",
                  os.path.join(WORK, "hf-phi3-no")], 1,
                 r"--export-hf: transformers' Phi3, the Llama that turns a share of each head by RoPE "
                 r"\(--rotary-percent\) or LongRoPE, has no biases \(--add-qkv-bias, or Llama's flags without "
                 r"--disable-bias-linear\): --export writes this model's weights$")


# Llama's flags without --disable-bias-linear: a bias on every linear layer (Megatron's add_bias_linear).
EVERY_BIAS = ["--swiglu", "--position-embedding-type", "rope", "--untie-embeddings-and-output-weights"]


def check_stablelm(gen, tokens, targets):
    """StableLM (StableLM 2 1.6B's StableLmForCausalLM: a Llama with LayerNorms, biases included, RoPE over a quarter of
    each head, q, k and v's biases with use_qkv_bias): its config.json, StableLmConfig's defaults taken where keys are
    left out, loads to Hugging Face's loss; --export-hf writes a Llama with --normalization LayerNorm as StableLM,
    which loads back; what StableLM lacks is refused."""
    folder = os.path.join(WORK, "stablelm")
    os.makedirs(folder, exist_ok=True)
    sd = llama_weights(gen, qkv_bias=True)
    r = lambda *shape: torch.randn(*shape, generator=gen) * 0.2  # noqa: E731
    for l in range(LAYERS):
        for norm in ("input_layernorm", "post_attention_layernorm"):
            sd[f"model.layers.{l}.{norm}.bias"] = r(C)
    sd["model.norm.bias"] = r(C)
    save(os.path.join(folder, "model.safetensors"), sd)
    # partial_rotary_factor left out: StableLmConfig's 0.25 (a quarter of heads of 16: 4 dimensions).
    config = {"model_type": "stablelm", "architectures": ["StableLmForCausalLM"], "num_hidden_layers": LAYERS,
              "hidden_size": C, "num_attention_heads": HEADS, "num_key_value_heads": KV, "intermediate_size": FFN,
              "max_position_embeddings": SEQ, "vocab_size": VOCAB, "layer_norm_eps": 1e-5, "rope_theta": 10000.0,
              "use_qkv_bias": True, "qk_layernorm": False, "use_parallel_residual": False, "hidden_act": "silu",
              "tie_word_embeddings": False}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)
    reference = llama_loss(sd, tokens, targets, partial=0.25).item()
    rms = llama_loss({k: v for k, v in sd.items() if not k.endswith("layernorm.bias") and k != "model.norm.bias"},
                     tokens, targets, partial=0.25).item()
    check("StableLM's LayerNorms change Hugging Face's loss here", abs(reference - rms) > 1e-3,
          f"{reference:.6f} with them, {rms:.6f} with RMSNorms", always=True)
    compare("StableLM (StableLmConfig's share of each head)", folder, ["--use-checkpoint-args"], reference, tokens,
            targets, True, "header")
    expect_error("a StableLM file for a Llama with RMSNorm", ["--preset", "llama-tiny", "--add-qkv-bias", "--load",
                 os.path.join(folder, "model.safetensors"), "--finetune"], 1,
                 r"stablelm/model\.safetensors holds a Hugging Face StableLM model, whose norms are LayerNorm, and "
                 r"this run's model is a llama \(--normalization\)$")
    out = os.path.join(WORK, "hf-stablelm")
    rc, err, written, exported = export_hf(folder, out)
    check("--export-hf of a Llama with LayerNorm: StableLM's config.json and tensors",
          rc == 0 and written.get("model_type") == "stablelm" and
          written.get("architectures") == ["StableLmForCausalLM"] and written.get("partial_rotary_factor") == 0.25 and
          written.get("use_qkv_bias") is True and written.get("layer_norm_eps") == 1e-5 and
          "rms_norm_eps" not in written and "model.norm.bias" in exported and
          "model.layers.1.post_attention_layernorm.bias" in exported,
          f"exit {rc}, {written}, {list(exported)[:6]} {err.strip()[-300:]}")
    if rc == 0:
        loss = llama_loss(exported, tokens, targets, partial=written["partial_rotary_factor"]).item()
        check("--export-hf of a Llama with LayerNorm: Hugging Face's loss", abs(loss - reference) <= 1e-5,
              f"{loss:.6f} vs {reference:.6f}")
        compare("--export-hf of a Llama with LayerNorm loaded back", out, ["--use-checkpoint-args"], reference, tokens,
                targets, True, "header")
    for key, value, pattern in (("use_parallel_residual", True, r"use_parallel_residual is true: srunway-train's "
                                 r"stablelm has false$"),
                                ("head_dim", 32, r"head_dim is 32: transformers' StableLM has heads hidden_size / "
                                 r"num_attention_heads wide, 16$")):
        refused_config("StableLM", folder, config, key, value, pattern)
    expect_error("--export-hf of a Llama with LayerNorm and interleaved RoPE",
                 ["--preset", "llama-tiny", "--normalization", "LayerNorm", "--rotary-interleaved", "--export-hf",
                  os.path.join(WORK, "hf-stablelm-no")], 1,
                 r"--export-hf: transformers' StableLM, the Llama with LayerNorms \(--normalization LayerNorm\), has "
                 r"no interleaved RoPE \(--rotary-interleaved\): --export writes this model's weights$")


def check_gemma(gen, tokens, targets):
    """Gemma (Gemma 1's GemmaForCausalLM: a Llama with GeGLU, its embedding times sqrt(hidden_size), norms times
    1 + weight as its files store them, heads of their own width, the head tied): its config.json loads to Hugging
    Face's loss, as a Llama with --geglu, --embedding-multiplier and --apply-layernorm-1p; the same file for a model
    without them is refused; Gemma 1's hidden_act "gelu" is the tanh approximation; --export-hf writes such a model
    as Gemma, which loads back; another activation, and what Gemma lacks, are refused."""
    folder = os.path.join(WORK, "gemma")
    os.makedirs(folder, exist_ok=True)
    hd = 2 * C // HEADS  # as Gemma 7B's heads, wider than hidden / heads
    # Gemma's files hold its norms' weights less 1 (GemmaRMSNorm multiplies by 1 + weight), and no lm_head.
    sd = {k: v - 1 if k.endswith("norm.weight") else v for k, v in llama_weights(gen, tied=True, hd=hd).items()}
    save(os.path.join(folder, "model.safetensors"), sd)
    config = {"model_type": "gemma", "architectures": ["GemmaForCausalLM"], "num_hidden_layers": LAYERS,
              "hidden_size": C, "num_attention_heads": HEADS, "num_key_value_heads": KV, "head_dim": hd,
              "intermediate_size": FFN, "max_position_embeddings": SEQ, "vocab_size": VOCAB, "rms_norm_eps": 1e-5,
              "rope_theta": 10000.0, "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh",
              "attention_bias": False, "tie_word_embeddings": True}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)
    reference = llama_loss(sd, tokens, targets, gemma=True).item()
    plain = llama_loss({k: v + 1 if k.endswith("norm.weight") else v for k, v in sd.items()}, tokens, targets).item()
    check("Gemma's GeGLU, scaled embedding and 1 + weight norms change Hugging Face's loss here",
          abs(reference - plain) > 1e-3, f"{reference:.6f} as Gemma, {plain:.6f} as a Llama", always=True)
    compare("Gemma from its config.json (--use-checkpoint-args)", folder, ["--use-checkpoint-args"], reference, tokens,
            targets, True, "header")
    gemma_flags = ["--preset", "llama-tiny", "--kv-channels", str(hd), "--geglu", "--embedding-multiplier",
                   str(C ** 0.5)]
    compare("Gemma with --geglu --embedding-multiplier 8 (norms whole)", folder, gemma_flags, reference, tokens,
            targets, True, "header")
    compare("Gemma with --apply-layernorm-1p too", folder, [*gemma_flags, "--apply-layernorm-1p"], reference, tokens,
            targets, True, "header")
    expect_error("a Gemma file for a Llama without GeGLU", ["--preset", "llama-tiny", "--kv-channels", str(hd),
                 "--load", folder, "--finetune"], 1,
                 r"gemma/model\.safetensors holds a Gemma model \(the config\.json beside it\), whose FFN is GeGLU and "
                 r"whose embedding is times 8, and this run's model is a llama \(--geglu --embedding-multiplier 8, or "
                 r"--use-checkpoint-args\)$")
    bare = bare_folder("gemma-bare", sd)
    expect_error("a Gemma model from a Llama-named file with no config.json", [*gemma_flags, "--load", bare,
                 "--finetune"], 1, r"gemma-bare/model\.safetensors has Llama's tensor names and no config\.json "
                 r"beside it, and this run's model is Gemma's \(--geglu, --embedding-multiplier 8\): Gemma's files "
                 r"hold the norms' weights less 1, Llama's whole, and only the config\.json tells them apart; put the "
                 r"model's beside it$")
    out = os.path.join(WORK, "hf-gemma")
    rc, err, written, exported = export_hf(folder, out)
    check("--export-hf of a Llama with GeGLU: Gemma's config.json and tensors",
          rc == 0 and written.get("model_type") == "gemma" and written.get("architectures") == ["GemmaForCausalLM"]
          and written.get("head_dim") == hd and written.get("hidden_act") == "gelu_pytorch_tanh" and
          written.get("hidden_activation") == "gelu_pytorch_tanh" and written.get("tie_word_embeddings") is True
          and "lm_head.weight" not in exported
          and torch.equal(exported.get("model.norm.weight", torch.ones(1)), sd["model.norm.weight"]),
          f"exit {rc}, {written}, {list(exported)[:6]} {err.strip()[-300:]}")
    if rc == 0:
        loss = llama_loss(exported, tokens, targets, gemma=True).item()
        check("--export-hf of a Llama with GeGLU: Hugging Face's loss", abs(loss - reference) <= 1e-5,
              f"{loss:.6f} vs {reference:.6f}")
        compare("--export-hf of a Llama with GeGLU loaded back", out, ["--use-checkpoint-args"], reference, tokens,
                targets, True, "header")
    # Gemma 1's own config.json: hidden_act "gelu" and no hidden_activation, the approximation all the same.
    legacy = {k: v for k, v in config.items() if k != "hidden_activation"}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({**legacy, "hidden_act": "gelu"}, f)
    compare("Gemma 1's config.json (hidden_act gelu, GELU's tanh approximation)", folder, ["--use-checkpoint-args"],
            reference, tokens, targets, True, "header")
    for key, value, pattern in (
            ("hidden_activation", "gelu", r"hidden_activation is gelu: srunway-train's gemma has GELU's tanh "
             r"approximation \(gelu_pytorch_tanh\)$"),
            ("hidden_act", "silu", r"hidden_act is silu: srunway-train's gemma has GELU's tanh approximation"),
            ("use_bidirectional_attention", True, r"use_bidirectional_attention is true: srunway-train's gemma has "
             r"false$")):
        refused_config("Gemma", folder, config, key, value, pattern)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)
    for flags, pattern in (
            (["--geglu", "--embedding-multiplier", "2"], r"transformers' Gemma, the Llama with GeGLU \(--geglu\), has "
             r"no embedding multiplier but the square root of its width \(--embedding-multiplier\)"),
            (["--geglu", "--embedding-multiplier", "8", "--rotary-percent", "0.5"], r"has no RoPE over part of each "
             r"head or in interleaved pairs"),
            (["--embedding-multiplier", "8"], r"transformers' Llama takes its embedding as it is, and this model's "
             r"times 8 \(--embedding-multiplier; Gemma's, with --geglu, is the square root of its width\)")):
        expect_error(f"--export-hf of a Llama with {' '.join(flags)}",
                     ["--preset", "llama-tiny", *flags, "--export-hf", os.path.join(WORK, "hf-gemma-no")], 1, pattern)


def check_nemotron(gen, tokens, targets):
    """Nemotron (NemotronForCausalLM: a GPT with RoPE over half of each head, LayerNorms times 1 + weight as its files
    store them, squared ReLU, no biases, grouped KV heads, its own head): its config.json loads to Hugging Face's
    loss, as do Nemotron's flags (--position-embedding-type rope --rotary-percent 0.5 --disable-bias-linear
    --squared-relu, with --apply-layernorm-1p or without); --export-hf writes such a GPT as Nemotron, which loads
    back; the file for a GPT with the learned table, and without its config.json, is refused."""
    folder = os.path.join(WORK, "nemotron")
    os.makedirs(folder, exist_ok=True)
    r = lambda *shape: torch.randn(*shape, generator=gen) * 0.2  # noqa: E731
    hd = C // HEADS
    sd = {"model.embed_tokens.weight": r(VOCAB, C)}
    for l in range(LAYERS):
        p = f"model.layers.{l}."
        sd.update({p + "input_layernorm.weight": r(C), p + "input_layernorm.bias": r(C),
                   p + "self_attn.q_proj.weight": r(HEADS * hd, C), p + "self_attn.k_proj.weight": r(KV * hd, C),
                   p + "self_attn.v_proj.weight": r(KV * hd, C), p + "self_attn.o_proj.weight": r(C, HEADS * hd),
                   p + "post_attention_layernorm.weight": r(C), p + "post_attention_layernorm.bias": r(C),
                   p + "mlp.up_proj.weight": r(FFN, C), p + "mlp.down_proj.weight": r(C, FFN)})
    sd.update({"model.norm.weight": r(C), "model.norm.bias": r(C), "lm_head.weight": r(VOCAB, C)})
    save(os.path.join(folder, "model.safetensors"), sd)
    config = {"model_type": "nemotron", "architectures": ["NemotronForCausalLM"], "num_hidden_layers": LAYERS,
              "hidden_size": C, "num_attention_heads": HEADS, "num_key_value_heads": KV, "intermediate_size": FFN,
              "max_position_embeddings": SEQ, "vocab_size": VOCAB, "norm_eps": 1e-5, "rope_theta": 10000.0,
              "hidden_act": "relu2", "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": False}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)  # partial_rotary_factor left out: NemotronConfig's 0.5
    reference = llama_loss(sd, tokens, targets, partial=0.5, nemotron=True).item()
    whole = llama_loss(sd, tokens, targets, nemotron=True).item()
    check("RoPE over half of each head changes Hugging Face's Nemotron loss here", abs(reference - whole) > 1e-3,
          f"{reference:.6f} over half, {whole:.6f} over all", always=True)
    if compare("Nemotron from its config.json (--use-checkpoint-args)", folder, ["--use-checkpoint-args"], reference,
               tokens, targets, False, "header") is not None:
        model = exported_model(os.path.join(WORK, "export.safetensors"))
        check("Nemotron from its config.json: a GPT with RoPE, squared ReLU, norms 1 + weight, no biases",
              model.get("position_embedding_type") == "rope" and model.get("squared_relu") is True and
              model.get("apply_layernorm_1p") is True and model.get("add_bias_linear") is False and
              model.get("rotary_percent") == 0.5 and model.get("n_kv_head") == KV, f"{model}")
    flags = ["--position-embedding-type", "rope", "--rotary-percent", "0.5", "--disable-bias-linear",
             "--num-query-groups", str(KV), "--squared-relu", "--ffn-hidden-size", str(FFN),
             "--untie-embeddings-and-output-weights"]
    compare("Nemotron with its flags (norms whole)", folder, flags, reference, tokens, targets, False, "header")
    compare("Nemotron with its flags and --apply-layernorm-1p", folder, [*flags, "--apply-layernorm-1p"], reference,
            tokens, targets, False, "header")
    expect_error("a Llama file for a Llama with a learned table", ["--swiglu", "--normalization", "RMSNorm",
                 "--disable-bias-linear", "--load", os.path.join(WORK, "llama-untied.safetensors"), "--finetune"], 1,
                 r"llama-untied\.safetensors holds a Hugging Face Llama model, whose positions are RoPE's, and this "
                 r"run's model has a learned table \(--position-embedding-type learned_absolute\)$")
    expect_error("a Nemotron file for a GPT with the learned table", ["--disable-bias-linear", "--num-query-groups",
                 str(KV), "--squared-relu", "--ffn-hidden-size", str(FFN), "--untie-embeddings-and-output-weights",
                 "--load", folder, "--finetune"], 1,
                 r"nemotron/model\.safetensors holds a Hugging Face Nemotron model \(the config\.json beside it\), a "
                 r"GPT with RoPE, and this run's model is a gpt without biases, with its own output layer "
                 r"\(--position-embedding-type rope, or --use-checkpoint-args\)$")
    bare = bare_folder("nemotron-bare", sd)
    expect_error("a Nemotron file with no config.json", [*flags, "--load", bare, "--finetune"], 1,
                 r"nemotron-bare/model\.safetensors has Llama's tensor names with LayerNorms' biases and no "
                 r"config\.json beside it, and this run's model is a GPT with RoPE \(Nemotron's\): only the "
                 r"config\.json tells a Nemotron's files \(norms stored less 1\) from StableLM's; put the model's "
                 r"beside it$")
    out = os.path.join(WORK, "hf-nemotron")
    rc, err, written, exported = export_hf(folder, out)
    check("--export-hf of a GPT with RoPE: Nemotron's config.json and tensors",
          rc == 0 and written.get("model_type") == "nemotron" and
          written.get("architectures") == ["NemotronForCausalLM"] and written.get("partial_rotary_factor") == 0.5 and
          written.get("hidden_act") == "relu2" and written.get("num_key_value_heads") == KV and
          written.get("attention_bias") is False and written.get("tie_word_embeddings") is False and
          torch.equal(exported.get("model.norm.weight", torch.ones(1)), sd["model.norm.weight"]) and
          sorted(exported) == sorted(k for k in sd),
          f"exit {rc}, {written}, {sorted(set(exported) ^ set(sd))[:6]} {err.strip()[-300:]}")
    if rc == 0:
        loss = llama_loss(exported, tokens, targets, partial=written["partial_rotary_factor"], nemotron=True).item()
        check("--export-hf of a GPT with RoPE: Hugging Face's loss", abs(loss - reference) <= 1e-5,
              f"{loss:.6f} vs {reference:.6f}")
        compare("--export-hf of a GPT with RoPE loaded back", out, ["--use-checkpoint-args"], reference, tokens,
                targets, False, "header")
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({**config, "hidden_act": "gelu"}, f)
    expect_error("a Nemotron config.json with another activation", ["--use-checkpoint-args", "--load", folder,
                 "--finetune"], 1, r"config\.json: hidden_act is \"gelu\": srunway-train's nemotron has \"relu2\"$")


def glm_weights(sd):
    """A Llama's state dict as GLM's: gate and up stacked in gate_up_proj."""
    out = dict(sd)
    for l in range(LAYERS):
        m = f"model.layers.{l}.mlp."
        out[m + "gate_up_proj.weight"] = torch.cat([out.pop(m + f"{n}_proj.weight") for n in ("gate", "up")])
    return out


def check_glm(gen, tokens, targets):
    """GLM (GLM-4-9B's GlmForCausalLM: a Llama with q, k and v's biases, RoPE over half of each head in interleaved
    pairs, gate and up in one tensor): its config.json, GlmConfig's defaults taken where keys are left out, loads to
    Hugging Face's loss; --export-hf writes a Llama with --rotary-interleaved as GLM, which loads back; scaled RoPE and
    what GLM lacks are refused."""
    folder = os.path.join(WORK, "glm")
    os.makedirs(folder, exist_ok=True)
    sd = llama_weights(gen, qkv_bias=True)
    save(os.path.join(folder, "model.safetensors"), glm_weights(sd))
    # partial_rotary_factor and attention_bias left out: GlmConfig's 0.5 and true.
    config = {"model_type": "glm", "architectures": ["GlmForCausalLM"], "num_hidden_layers": LAYERS,
              "hidden_size": C, "num_attention_heads": HEADS, "num_key_value_heads": KV, "head_dim": C // HEADS,
              "intermediate_size": FFN, "max_position_embeddings": SEQ, "vocab_size": VOCAB, "rms_norm_eps": 1e-5,
              "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": False}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)
    reference = llama_loss(sd, tokens, targets, partial=0.5, interleaved=True).item()
    halves = llama_loss(sd, tokens, targets, partial=0.5).item()
    check("GLM's interleaved pairs change Hugging Face's loss here", abs(reference - halves) > 1e-3,
          f"{reference:.6f} interleaved, {halves:.6f} in halves", always=True)
    compare("GLM (GlmConfig's defaults)", folder, ["--use-checkpoint-args"], reference, tokens, targets, True,
            "header")
    out = os.path.join(WORK, "hf-glm")
    rc, err, written, exported = export_hf(folder, out)
    names = list(exported)
    check("--export-hf of a Llama with interleaved RoPE: GLM's config.json and tensors",
          rc == 0 and written.get("model_type") == "glm" and written.get("architectures") == ["GlmForCausalLM"] and
          written.get("partial_rotary_factor") == 0.5 and written.get("attention_bias") is True and
          written.get("head_dim") == C // HEADS and "model.layers.0.mlp.gate_up_proj.weight" in names and
          "model.layers.1.self_attn.k_proj.bias" in names, f"exit {rc}, {written}, {names[:6]} {err.strip()[-300:]}")
    if rc == 0:
        for l in range(LAYERS):
            m = f"model.layers.{l}.mlp."
            gate, up = exported.pop(m + "gate_up_proj.weight").chunk(2)
            exported.update({m + "gate_proj.weight": gate, m + "up_proj.weight": up})
        loss = llama_loss(exported, tokens, targets, partial=written["partial_rotary_factor"], interleaved=True).item()
        check("--export-hf of a Llama with interleaved RoPE: Hugging Face's loss", abs(loss - reference) <= 1e-5,
              f"{loss:.6f} vs {reference:.6f}")
        compare("--export-hf of a Llama with interleaved RoPE loaded back", out, ["--use-checkpoint-args"], reference,
                tokens, targets, True, "header")
    refused_config("GLM", folder, config, "rope_scaling", {"rope_type": "linear", "factor": 2.0},
                   r"rope_scaling: rope_type 'linear': srunway-train reads GLM's RoPE unscaled \(default\)$")
    expect_error("--export-hf of a Llama with interleaved RoPE and every bias",
                 ["--preset", "llama-tiny", "--rotary-interleaved", *EVERY_BIAS, "--export-hf",
                  os.path.join(WORK, "hf-glm-no")], 1,
                 r"--export-hf: transformers' GLM, the Llama that turns RoPE's pairs interleaved "
                 r"\(--rotary-interleaved\), has no biases beside q, k and v's \(Llama's flags without "
                 r"--disable-bias-linear\): --export writes this model's weights$")


def check_llama_biases(gen, tokens, targets, llama):
    """A Llama with a bias on every linear layer (attention_bias and mlp_bias): its files take Llama's flags without
    --disable-bias-linear, or config.json's two keys; one key without the other is refused."""
    sd = llama_weights(gen, biases=True)
    config = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "num_hidden_layers": LAYERS,
              "hidden_size": C, "num_attention_heads": HEADS, "num_key_value_heads": KV, "intermediate_size": FFN,
              "max_position_embeddings": SEQ, "vocab_size": VOCAB, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
              "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": True, "mlp_bias": True}
    missing = r"14 tensors the model has no place for \(model\.layers\.0\.mlp\.down_proj\.bias, "
    folder = check_llama_variant("Biased Llama", sd, EVERY_BIAS, lambda k: k.endswith(".bias"), missing, config,
                                 tokens, targets, llama)
    refused_config("Llama", folder, config, "mlp_bias", False,
                   r"attention_bias is true and mlp_bias false: srunway-train's llama has a bias on every linear layer "
                   r"\(Megatron's add_bias_linear\) or on none$")


def check_qwen3(gen, tokens, targets, llama):
    """Qwen3 (Llama with an RMSNorm on each head's q and k): its files take --qk-layernorm, or config.json's
    model_type qwen3."""
    sd = llama_weights(gen, tied=True, qk_norm=True)
    config = {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": LAYERS,
              "hidden_size": C, "num_attention_heads": HEADS, "num_key_value_heads": KV, "head_dim": C // HEADS,
              "intermediate_size": FFN, "max_position_embeddings": SEQ, "vocab_size": VOCAB, "rms_norm_eps": 1e-5,
              "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": True, "attention_bias": False,
              "use_sliding_window": False, "sliding_window": None, "max_window_layers": 28, "attention_dropout": 0.0}
    missing = r"4 tensors the model has no place for \(model\.layers\.0\.self_attn\.k_norm\.weight, "
    folder = check_llama_variant("Qwen3", sd, "--qk-layernorm", lambda k: "_norm." in k, missing, config, tokens,
                                 targets, llama)
    refused_config("Qwen3", folder, config, "attention_bias", True,
                   r"attention_bias is true: srunway-train's qwen3 has false")
    # Heads wider than hidden / heads, as Qwen3-0.6B's (head_dim 128 beside 1024 / 16): --kv-channels, or head_dim.
    wide = llama_weights(gen, tied=True, qk_norm=True, hd=2 * C // HEADS)
    wide_folder = os.path.join(WORK, "qwen3-wide")
    os.makedirs(wide_folder, exist_ok=True)
    save(os.path.join(wide_folder, "model.safetensors"), wide)
    reference = llama_loss(wide, tokens, targets).item()
    compare("Qwen3 with heads 32 wide (--kv-channels 32)", os.path.join(wide_folder, "model.safetensors"),
            [*llama, "--qk-layernorm", "--kv-channels", "32"], reference, tokens, targets, True)
    with open(os.path.join(wide_folder, "config.json"), "w") as f:
        json.dump({**config, "head_dim": 2 * C // HEADS}, f)
    compare("Qwen3 with heads 32 wide from its config.json", wide_folder, ["--use-checkpoint-args"], reference, tokens,
            targets, True)
    refused_config("Qwen3", folder, config, "head_dim", 0, r"head_dim must be positive, got 0")
    # transformers has no class for these three: refused before the first step.
    expect_error("--export-hf of a GPT with --kv-channels", ["--preset", "gpt-tiny", "--kv-channels", "32",
                 "--export-hf", os.path.join(WORK, "hf-gpt-kv")], 1,
                 r"--export-hf: transformers' GPT-2 has heads n_embd / n_head wide, and this model's are 32")
    expect_error("--export-hf of a GPT with --qk-layernorm", ["--preset", "gpt-tiny", "--qk-layernorm", "--export-hf",
                 os.path.join(WORK, "hf-gpt-qk")], 1, r"--export-hf: transformers' GPT-2 has no q and k norms")
    expect_error("--export-hf of a Llama with --qk-layernorm and --add-qkv-bias",
                 [*llama, "--qk-layernorm", "--add-qkv-bias", "--export-hf", os.path.join(WORK, "hf-qk-bias")], 1,
                 r"--export-hf: transformers' Qwen3, .* biases o_proj too")
    expect_error("--export-hf of a Llama with --qk-layernorm and every bias",
                 [*llama, *EVERY_BIAS, "--qk-layernorm", "--export-hf", os.path.join(WORK, "hf-qk-biases")], 1,
                 r"--export-hf: transformers' Qwen3, a Llama with q and k norms \(--qk-layernorm\), has no MLP biases")


def check_tied_head(gen, tokens, targets, llama, llama_config):
    """The head tied to the embedding or its own, as config.json's tie_word_embeddings says and Megatron's flags ask
    (tied unless --untie-embeddings-and-output-weights). A tied Llama's file (Llama 3.2 1B's, Qwen2.5's: no lm_head)
    loads from its config.json as a tied model, one matrix, as from Llama's flags without --untie...; a head that is
    the embedding again loads either way; a head of its own for a tied model, a head that differs beside a config.json
    that ties them, and no head beside one that unties them are refused. A GPT-2 whose config.json unties its head
    loads as an untied GPT, from its config.json or with --untie-embeddings-and-output-weights. --export-hf writes a
    tied Llama without lm_head and an untied GPT-2 with it, each as tie_word_embeddings says, and both load back."""
    folder = os.path.join(WORK, "tie")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.safetensors")
    export = os.path.join(WORK, "export.safetensors")  # exported_loss's
    sd = llama_weights(gen, tied=True)
    reference = llama_loss(sd, tokens, targets).item()
    tied_llama = ["--swiglu", "--position-embedding-type", "rope", "--disable-bias-linear", "--normalization",
                  "RMSNorm"]  # llama-tiny's sizes, its head tied (no --untie-embeddings-and-output-weights)

    def with_config(tied, head):
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump({**llama_config, "tie_word_embeddings": tied}, f)
        save(path, sd if head is None else {**sd, "lm_head.weight": head})

    def is_tied(what, tied):
        model, tensors = exported_model(export), load(export)
        check(what, model.get("untie_embeddings_and_output_weights") is (not tied) and
              ("lm_head.weight" in tensors) is (not tied), f"{model.get('untie_embeddings_and_output_weights')}, "
              f"lm_head {'in' if 'lm_head.weight' in tensors else 'not in'} the export")

    with_config(True, None)
    if compare("a tied Llama from its config.json (--use-checkpoint-args)", folder, ["--use-checkpoint-args"],
               reference, tokens, targets, True) is not None:
        is_tied("a tied Llama from its config.json is tied", True)
    if compare("a tied Llama from Llama's flags without --untie-embeddings-and-output-weights", path, tied_llama,
               reference, tokens, targets, True) is not None:
        is_tied("Llama's flags without --untie-embeddings-and-output-weights tie the head", True)
    out = os.path.join(WORK, "hf-tied-llama")
    rc, err, written, exported = export_hf(folder, out)
    check("--export-hf of a tied Llama: tie_word_embeddings true, no lm_head",
          rc == 0 and written.get("tie_word_embeddings") is True and "lm_head.weight" not in exported and
          torch.equal(exported.get("model.embed_tokens.weight", torch.ones(1)), sd["model.embed_tokens.weight"]),
          f"exit {rc}, {written.get('tie_word_embeddings')}, {sorted(exported)[:3]} {err.strip()[-300:]}")
    if rc == 0:
        compare("--export-hf of a tied Llama loaded back", out, ["--use-checkpoint-args"], reference, tokens, targets,
                True)
        is_tied("--export-hf of a tied Llama loads back tied", True)

    with_config(True, sd["model.embed_tokens.weight"].clone())
    log = compare("an untied Llama from a tied file that holds its head again", path, llama, reference, tokens,
                  targets, True)
    if log is not None:
        check("the head held again is said", "lm_head.weight is model.embed_tokens.weight again" in log,
              log.strip()[-300:])
    compare("a tied Llama from a file that holds its head again", folder, ["--use-checkpoint-args"], reference,
            tokens, targets, True)
    with_config(True, sd["model.embed_tokens.weight"] + 0.01)
    expect_error("a tied Llama whose file holds another head", [*llama, "--load", path, "--finetune"], 1,
                 r"tie/model\.safetensors: lm_head\.weight is not model\.embed_tokens\.weight, and the config\.json "
                 r"beside it ties them \(tie_word_embeddings: true\)")
    os.remove(os.path.join(folder, "config.json"))
    expect_error("a head of its own for a model that ties it", [*tied_llama, "--load", path, "--finetune"], 1,
                 r"tie/model\.safetensors: lm_head\.weight is not model\.embed_tokens\.weight: the file's head is its "
                 r"own, and this run's model ties its head to the embedding \(give "
                 r"--untie-embeddings-and-output-weights, or --use-checkpoint-args\)$")
    with_config(False, None)
    expect_error("an untied Llama whose file has no head", [*llama, "--load", folder, "--finetune"], 1,
                 r"tie/model\.safetensors: no lm_head\.weight, and the config\.json beside it unties the head")

    gpt2 = os.path.join(WORK, "tie-gpt2")
    os.makedirs(gpt2, exist_ok=True)
    gpt2_config = {"model_type": "gpt2", "n_layer": LAYERS, "n_embd": C, "n_head": HEADS, "n_positions": SEQ,
                   "vocab_size": VOCAB, "tie_word_embeddings": False}
    with open(os.path.join(gpt2, "config.json"), "w") as f:
        json.dump(gpt2_config, f)
    sd_g = gpt2_weights(gen)
    save(os.path.join(gpt2, "model.safetensors"), sd_g)
    expect_error("a GPT-2 whose config.json unties the head, without one", ["--preset", "gpt-tiny", "--load", gpt2,
                 "--finetune"], 1, r"tie-gpt2/model\.safetensors: no lm_head\.weight, and the config\.json beside it "
                 r"unties the head")
    sd_g["lm_head.weight"] = torch.randn(VOCAB, C, generator=gen) * 0.2
    save(os.path.join(gpt2, "model.safetensors"), sd_g)
    reference = gpt2_loss(sd_g, tokens, targets).item()
    if compare("an untied GPT-2 from its config.json", gpt2, ["--use-checkpoint-args"], reference, tokens, targets,
               False) is not None:
        is_tied("an untied GPT-2 from its config.json is untied", False)
    compare("an untied GPT-2 with --untie-embeddings-and-output-weights", gpt2,
            ["--preset", "gpt-tiny", "--untie-embeddings-and-output-weights"], reference, tokens, targets, False)
    expect_error("an untied GPT-2 for a tied GPT", ["--preset", "gpt-tiny", "--load", gpt2, "--finetune"], 1,
                 r"tie-gpt2/model\.safetensors: lm_head\.weight is not wte\.weight: the file's head is its own")
    out = os.path.join(WORK, "hf-untied-gpt2")
    rc, err, written, exported = export_hf(gpt2, out)
    check("--export-hf of an untied GPT: tie_word_embeddings false, its lm_head",
          rc == 0 and written.get("tie_word_embeddings") is False and
          torch.equal(exported.get("lm_head.weight", torch.ones(1)), sd_g["lm_head.weight"]),
          f"exit {rc}, {written.get('tie_word_embeddings')}, {sorted(exported)[-3:]} {err.strip()[-300:]}")
    if rc == 0:
        check("--export-hf of an untied GPT: Hugging Face's loss",
              abs(gpt2_loss({k[len("transformer."):] if k.startswith("transformer.") else k: v
                             for k, v in exported.items()}, tokens, targets).item() - reference) <= 1e-5)
        compare("--export-hf of an untied GPT loaded back", out, ["--use-checkpoint-args"], reference, tokens, targets,
                False)


def main():
    os.makedirs(WORK, exist_ok=True)
    gen = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, VOCAB, (2, 32), generator=gen)
    targets = torch.randint(0, VOCAB, (2, 32), generator=gen)
    gpt = ["--preset", "gpt-tiny"]
    llama = ["--preset", "llama-tiny"]

    # GPT-2 in each dtype; a GPT2LMHeadModel's state dict (transformer.*, lm_head, attention-mask buffers) with
    # more positions than the model's 128, which are left out.
    sd = gpt2_weights(gen)
    for dtype in ("F32", "BF16", "F16"):
        path = os.path.join(WORK, f"gpt2-{dtype}.safetensors")
        save(path, sd, dtype)
        compare(f"GPT-2 {dtype}", path, gpt, gpt2_loss(rounded(sd, dtype), tokens, targets).item(), tokens, targets,
                False)
    lm = gpt2_weights(gen, positions=2 * SEQ, prefix="transformer.")
    lm["lm_head.weight"] = lm["transformer.wte.weight"]
    for l in range(LAYERS):
        lm[f"transformer.h.{l}.attn.bias"] = torch.ones(1, 1, 2 * SEQ, 2 * SEQ).tril()
        lm[f"transformer.h.{l}.attn.masked_bias"] = torch.tensor(-1e4)
    save(os.path.join(WORK, "gpt2-lm.safetensors"), lm)
    plain = {k[len("transformer."):]: v for k, v in lm.items() if k.startswith("transformer.")}
    log = compare("GPT-2 as GPT2LMHeadModel saves it, 256 positions", os.path.join(WORK, "gpt2-lm.safetensors"), gpt,
                  gpt2_loss(plain, tokens, targets).item(), tokens, targets, False)
    if log is not None:
        check("the positions left out are said", "the first 128 of its 256 rows" in log, log.strip()[-300:])

    # Llama, untied in F16 and tied (no lm_head), and in two files with the hub's index.
    for tied, dtype in ((False, "F16"), (True, "F32")):
        sd_l = llama_weights(gen, tied)
        path = os.path.join(WORK, f"llama-{'tied' if tied else 'untied'}.safetensors")
        save(path, sd_l, dtype)
        log = compare(f"Llama {'tied' if tied else 'untied'} {dtype}", path, llama,
                      llama_loss(rounded(sd_l, dtype), tokens, targets).item(), tokens, targets, True)
        if log is not None and tied:
            check("the tied head is said", "lm_head: a copy of model.embed_tokens.weight" in log, log.strip()[-300:])
    sharded = os.path.join(WORK, "sharded")
    os.makedirs(sharded, exist_ok=True)
    names = list(sd_l)
    halves = {"model-00001-of-00002.safetensors": names[: len(names) // 2],
              "model-00002-of-00002.safetensors": names[len(names) // 2:]}
    for file, part in halves.items():
        save(os.path.join(sharded, file), {k: sd_l[k] for k in part})
    index = os.path.join(sharded, "model.safetensors.index.json")
    with open(index, "w") as f:
        json.dump({"metadata": {}, "weight_map": {k: file for file, part in halves.items() for k in part}}, f)
    compare("Llama in two files (model.safetensors.index.json)", index, llama,
            llama_loss(sd_l, tokens, targets).item(), tokens, targets, True)

    # Training from the Hugging Face file is training from our export of it.
    hf = os.path.join(WORK, "gpt2-F32.safetensors")
    ours = os.path.join(WORK, "ours.safetensors")
    train(*gpt, "--load", hf, "--skip-train", "--eval-iters", "0", "--export", ours)
    steps = []
    for path in (hf, ours):
        rc, out, err = train(*gpt, "--load", path, "--finetune", "--train-steps", "3")
        steps.append([re.sub(r"\| [0-9.]+ ms.*", "", line) for line in out.splitlines() if line.startswith("step")])
        check(f"--finetune --load {os.path.basename(path)}", rc == 0 and len(steps[-1]) == 3, err.strip()[-300:])
    check("the same steps from the Hugging Face file as from our export of it", steps[0] == steps[1],
          f"{steps[0]} vs {steps[1]}")

    # The model from config.json beside the file (or from our export's header), not --preset.
    with_config = os.path.join(WORK, "with-config")
    os.makedirs(with_config, exist_ok=True)
    shutil.copy(hf, os.path.join(with_config, "model.safetensors"))
    config = {"model_type": "gpt2", "n_layer": LAYERS, "n_embd": C, "n_head": HEADS, "n_positions": SEQ,
              "vocab_size": VOCAB, "n_inner": None, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5}
    with open(os.path.join(with_config, "config.json"), "w") as f:
        json.dump(config, f)
    # A Hugging Face model's folder, as from_pretrained takes it, is its model.safetensors.
    for path in (os.path.join(with_config, "model.safetensors"), with_config, ours):
        rc, out, err = train("--use-checkpoint-args", "--load", path, "--finetune", "--train-steps", "3")
        got = [re.sub(r"\| [0-9.]+ ms.*", "", line) for line in out.splitlines() if line.startswith("step")]
        check(f"--use-checkpoint-args --load {os.path.relpath(path, WORK)}", rc == 0 and got == steps[0],
              f"exit {rc}, {got} vs {steps[0]} {err.strip()[-300:]}")
    # Llama 3.1's RoPE scaling from config.json, its bounds small (wavelengths past 64 positions slowed, under 16
    # kept) so that it changes the loss of 32 positions: Hugging Face's forward with it is the loaded model's.
    llama_dir = os.path.join(WORK, "llama-scaled")
    os.makedirs(llama_dir, exist_ok=True)
    save(os.path.join(llama_dir, "model.safetensors"), sd_l)
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 64}
    llama_config = {"model_type": "llama", "num_hidden_layers": LAYERS, "hidden_size": C,
                    "num_attention_heads": HEADS, "num_key_value_heads": KV, "intermediate_size": FFN,
                    "max_position_embeddings": SEQ, "vocab_size": VOCAB, "rms_norm_eps": 1e-5,
                    "rope_scaling": scaling}
    with open(os.path.join(llama_dir, "config.json"), "w") as f:
        json.dump(llama_config, f)
    scaled, unscaled = (llama_loss(sd_l, tokens, targets, scaling=r).item() for r in (scaling, None))
    check("RoPE scaling changes Hugging Face's loss here", abs(scaled - unscaled) > 1e-3,
          f"{scaled:.6f} with it, {unscaled:.6f} without", always=True)
    compare("Llama with config.json's rope_scaling (llama3)", llama_dir, ["--use-checkpoint-args"], scaled, tokens,
            targets, True, scaling)
    # Linear scaling (transformers' older "type" key), in and out again.
    linear = {"type": "linear", "factor": 2.0}
    with open(os.path.join(llama_dir, "config.json"), "w") as f:
        json.dump({**llama_config, "rope_scaling": linear}, f)
    stretched = llama_loss(sd_l, tokens, targets, scaling=linear).item()
    check("linear RoPE scaling changes Hugging Face's loss here", abs(stretched - unscaled) > 1e-3,
          f"{stretched:.6f} with it, {unscaled:.6f} without", always=True)
    compare("Llama with config.json's rope_scaling (linear)", llama_dir, ["--use-checkpoint-args"], stretched, tokens,
            targets, True, linear)
    rc, err, written = export_hf_rope_scaling(llama_dir, os.path.join(WORK, "hf-llama-linear"))
    check("--export-hf of a linearly scaled Llama: config.json's rope_scaling",
          written == {"rope_type": "linear", "factor": 2.0}, f"exit {rc}, {written} {err.strip()[-300:]}")
    with open(os.path.join(llama_dir, "config.json"), "w") as f:
        json.dump({**llama_config, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}, f)
    expect_error("a config.json with dynamic RoPE scaling", ["--use-checkpoint-args", "--load", llama_dir,
                 "--finetune"], 1,
                 r"config\.json: rope_scaling: rope_type 'dynamic': srunway-train reads a llama's RoPE scaling "
                 r"from a Hugging Face config when it is linear \(linear\), as Llama 3\.1's \(llama3\), YaRN "
                 r"\(yarn\), or none$")
    with open(os.path.join(llama_dir, "config.json"), "w") as f:
        json.dump({**llama_config, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, f)
    expect_error("a config.json with llama3 RoPE scaling lacking its bounds", ["--use-checkpoint-args", "--load",
                 llama_dir, "--finetune"], 1, r"config\.json: rope_scaling: missing key 'low_freq_factor'")
    # A share of each head that RoPE turns (Phi-3's key; check_phi3): 1.0 is taken in a Llama's.
    with open(os.path.join(llama_dir, "config.json"), "w") as f:
        json.dump({**llama_config, "partial_rotary_factor": 1}, f)
    rc, _, err = train("--use-checkpoint-args", "--load", llama_dir, "--finetune", "--train-steps", "1")
    check("a config.json with partial_rotary_factor 1", rc == 0, f"exit {rc}: {err.strip()[-300:]}")
    # And out again: --export-hf writes the scaling into config.json, and what it wrote loads back with it.
    with open(os.path.join(llama_dir, "config.json"), "w") as f:
        json.dump(llama_config, f)
    scaled_out = os.path.join(WORK, "hf-llama-scaled")
    rc, err, written = export_hf_rope_scaling(llama_dir, scaled_out)
    check("--export-hf of a scaled Llama: config.json's rope_scaling", rc == 0 and written == scaling,
          f"exit {rc}, {written} {err.strip()[-300:]}")
    if rc == 0:
        loss = llama_loss(load(os.path.join(scaled_out, "model.safetensors")), tokens, targets,
                          scaling=written).item()
        check("--export-hf of a scaled Llama: Hugging Face's loss", abs(loss - scaled) <= 1e-5,
              f"{loss:.6f} vs {scaled:.6f}")
        back = os.path.join(WORK, "back-scaled.safetensors")
        rc, _, err = train("--use-checkpoint-args", "--load", scaled_out, "--skip-train", "--eval-iters", "0",
                           "--export", back)
        model = exported_model(back) if rc == 0 else {}
        want = {k: v for k, v in scaling.items() if k != "rope_type"}
        check("--export-hf of a scaled Llama loaded back keeps the scaling", model.get("rope_scaling") == want,
              f"exit {rc}, {model} {err.strip()[-300:]}")

    check_yarn(sd_l, llama_config, tokens, targets)
    check_mistral(sd_l, llama_config, tokens, targets)
    check_rope_parameters(sd_l, llama_config, tokens, targets)
    check_phi3(gen, tokens, targets)
    check_glm(gen, tokens, targets)
    check_stablelm(gen, tokens, targets)
    check_qwen2(gen, tokens, targets, llama)
    check_qwen3(gen, tokens, targets, llama)
    check_llama_biases(gen, tokens, targets, llama)
    check_tied_head(gen, tokens, targets, llama, llama_config)
    check_gemma(gen, tokens, targets)
    check_nemotron(gen, tokens, targets)

    # transformers' "gelu" (GELUActivation: PyTorch's gelu, exact) is a GPT with exact GELU (--no-bias-gelu-fusion):
    # Hugging Face's loss with it, which differs here from the tanh form's.
    with open(os.path.join(with_config, "config.json"), "w") as f:
        json.dump({**config, "activation_function": "gelu"}, f)
    hf_sd = load(os.path.join(with_config, "model.safetensors"))
    exact, tanh = (gpt2_loss(hf_sd, tokens, targets, exact=e).item() for e in (True, False))
    check("exact GELU changes GPT-2's loss here", abs(exact - tanh) > 1e-5, f"{exact:.6f} exact, {tanh:.6f} tanh",
          always=True)
    if compare("a GPT-2 whose activation_function is gelu (exact)", with_config, ["--use-checkpoint-args"], exact,
               tokens, targets, False, "header") is not None:
        check("a GPT-2 whose activation_function is gelu has exact GELU",
              exported_model(os.path.join(WORK, "export.safetensors")).get("exact_gelu") is True)
    compare("a GPT-2 whose activation_function is gelu, with --no-bias-gelu-fusion", with_config,
            [*gpt, "--no-bias-gelu-fusion"], exact, tokens, targets, False, "header")

    # Attention scaled otherwise than ours: refused by name (once read silently as ours).
    for key, value in (("scale_attn_weights", False), ("scale_attn_by_inverse_layer_idx", True)):
        refused_config("GPT-2", with_config, config, key, value,
                       rf"{key} is {json.dumps(value)}: srunway-train's gpt2 has {json.dumps(not value)}$")
    with open(os.path.join(with_config, "config.json"), "w") as f:
        json.dump({"model_type": "gpt2", "n_layer": LAYERS, "n_embd": C, "n_head": HEADS, "n_positions": SEQ,
                   "vocab_size": VOCAB, "tie_word_embeddings": False}, f)
    expect_error("a GPT-2 config.json with an untied head, beside a file without one", ["--use-checkpoint-args",
                 "--load", os.path.join(with_config, "model.safetensors"), "--finetune"], 1,
                 r"model\.safetensors: no lm_head\.weight, and the config\.json beside it unties the head")

    # --export-hf writes what Hugging Face's forward computes our model's loss from, and config.json for it; and
    # back through --use-checkpoint-args, the same weights bit for bit.
    # A Llama with --add-qkv-bias is a Qwen2 there (its biases trained away from their initial zeros), one with
    # --qk-layernorm a Qwen3, a GPT with --squared-relu a GPT-2 whose activation_function is relu2, one with
    # --no-bias-gelu-fusion (exact GELU) a GPT-2 whose activation_function is gelu.
    relu2_loss = functools.partial(gpt2_loss, relu2=True)
    erf_loss = functools.partial(gpt2_loss, exact=True)
    for preset, args, is_llama, hf_loss in (("gpt-tiny", [], False, gpt2_loss), ("llama-tiny", [], True, llama_loss),
                                            ("qwen2", ["--add-qkv-bias"], True, llama_loss),
                                            ("qwen3", ["--qk-layernorm"], True, llama_loss),
                                            ("qwen3-wide", ["--qk-layernorm", "--kv-channels", "32"], True,
                                             llama_loss),
                                            ("gpt-relu2", ["--squared-relu"], False, relu2_loss),
                                            ("gpt-erf", ["--no-bias-gelu-fusion"], False, erf_loss),
                                            ("llama-biases", EVERY_BIAS, True, llama_loss)):
        out_dir = os.path.join(WORK, f"hf-{preset}")
        ours_path = os.path.join(WORK, f"ours-{preset}.safetensors")
        rc, _, err = train("--preset", "gpt-tiny" if not is_llama else "llama-tiny", *args, "--train-steps", "2",
                           "--export-hf", out_dir, "--export", ours_path)
        if rc != 0:
            check(f"--export-hf of {preset}", False, err.strip()[-400:])
            continue
        ours = load(ours_path)
        reference = model_loss(ours, tokens, targets, is_llama, LAYERS, HEADS, KV if is_llama else HEADS, 1e-5,
                               10000.0, squared_relu="--squared-relu" in args,
                               exact_gelu="--no-bias-gelu-fusion" in args).item()
        loss = hf_loss(load(os.path.join(out_dir, "model.safetensors")), tokens, targets).item()
        check(f"--export-hf of {preset}", abs(loss - reference) <= 1e-5,
              f"Hugging Face's forward {loss:.6f}, srunway {reference:.6f}", always=True)
        with open(os.path.join(out_dir, "config.json")) as f:
            config = json.load(f)
        qwen2 = "--add-qkv-bias" in args
        llama_type = "qwen3" if "--qk-layernorm" in args else "qwen2" if qwen2 else "llama"
        architecture = {"qwen3": "Qwen3ForCausalLM", "qwen2": "Qwen2ForCausalLM", "llama": "LlamaForCausalLM"}
        want = ({"model_type": llama_type, "num_hidden_layers": LAYERS, "hidden_size": C,
                 "num_attention_heads": HEADS, "num_key_value_heads": KV, "intermediate_size": FFN,
                 "vocab_size": VOCAB, "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
                 "architectures": [architecture[llama_type]]} if is_llama else
                {"model_type": "gpt2", "n_layer": LAYERS, "n_embd": C, "n_head": HEADS, "n_inner": 4 * C,
                 "n_positions": SEQ, "vocab_size": VOCAB, "layer_norm_epsilon": 1e-5,
                 "activation_function": "relu2" if "--squared-relu" in args else
                 "gelu" if "--no-bias-gelu-fusion" in args else "gelu_new"})
        if llama_type == "qwen3":  # which Qwen3Config does not derive from the hidden size
            want["head_dim"] = 32 if "--kv-channels" in args else C // HEADS
        if is_llama and llama_type == "llama":  # a bias on every linear layer, or on none
            want["attention_bias"] = want["mlp_bias"] = args == EVERY_BIAS
        check(f"--export-hf of {preset}: config.json", all(config.get(k) == v for k, v in want.items()),
              json.dumps(config))
        if qwen2:
            biases = sorted(k for k in load(os.path.join(out_dir, "model.safetensors")) if k.endswith(".bias"))
            check("--export-hf of a Llama with --add-qkv-bias: q, k and v's biases, nothing else", biases == sorted(
                f"model.layers.{l}.self_attn.{n}_proj.bias" for l in range(LAYERS) for n in "qkv"), f"{biases}")
        back = os.path.join(WORK, "back.safetensors")
        rc, _, err = train("--use-checkpoint-args", "--load", os.path.join(out_dir, "model.safetensors"),
                           "--skip-train", "--eval-iters", "0", "--export", back)
        same = rc == 0 and all(torch.equal(t, load(back)[k]) for k, t in ours.items())
        check(f"--export-hf of {preset} loaded back", same, err.strip()[-400:])
        models = [exported_model(path) for path in (ours_path, back)] if rc == 0 else []
        check(f"--export-hf of {preset} loaded back: the same model", rc == 0 and models[0] == models[1], f"{models}")
    f32_ours = load(os.path.join(WORK, "ours-llama-tiny.safetensors"))
    f32_hf = load(os.path.join(WORK, "hf-llama-tiny", "model.safetensors"))
    # Past --export-hf-max-shard-gb the weights are save_pretrained's shards and index (a tensor past the limit
    # alone in its file), they hold the single file's tensors, and they load back; re-exporting into the folder
    # removes the other form's files (from_pretrained would take a stale model.safetensors before the index).
    sharded_out = os.path.join(WORK, "hf-sharded")
    shutil.rmtree(sharded_out, ignore_errors=True)
    shutil.copytree(os.path.join(WORK, "hf-llama-tiny"), sharded_out)
    limit = 100_000
    rc, _, err = train("--use-checkpoint-args", "--load", os.path.join(WORK, "ours-llama-tiny.safetensors"),
                       "--skip-train", "--eval-iters", "0", "--export-hf", sharded_out,
                       "--export-hf-max-shard-gb", str(limit / 1e9))
    files = sorted(os.listdir(sharded_out))
    shards = [f for f in files if re.fullmatch(r"model-\d{5}-of-\d{5}\.safetensors", f)]
    check("sharded --export-hf: its files", rc == 0 and len(shards) > 2 and files == sorted(
        ["config.json", "model.safetensors.index.json", *shards]) and all(
        f.endswith(f"-of-{len(shards):05}.safetensors") for f in shards), f"exit {rc}, {files} {err.strip()[-300:]}")
    if rc == 0 and shards:
        with open(os.path.join(sharded_out, "model.safetensors.index.json")) as f:
            shard_index = json.load(f)
        single = load(os.path.join(WORK, "hf-llama-tiny", "model.safetensors"))
        held, sizes, within = {}, [], True
        for shard in shards:
            tensors = load(os.path.join(sharded_out, shard))
            nbytes = sum(t.numel() * 4 for t in tensors.values())
            within = within and (nbytes <= limit or len(tensors) == 1)
            sizes.append(nbytes)
            held.update({name: (shard, t) for name, t in tensors.items()})
        check("sharded --export-hf: the single file's tensors, each in the file the index names",
              held.keys() == single.keys() and shard_index["weight_map"] == {k: v[0] for k, v in held.items()} and
              all(torch.equal(held[k][1], t) for k, t in single.items()) and
              shard_index["metadata"]["total_size"] == sum(sizes), f"{shard_index['metadata']}, {sizes}")
        check("sharded --export-hf: no shard past the limit but a lone tensor", within, f"{sizes}")
        back = os.path.join(WORK, "back-sharded.safetensors")
        rc, _, err = train("--use-checkpoint-args", "--load", sharded_out, "--skip-train", "--eval-iters", "0",
                           "--export", back)
        same = rc == 0 and all(torch.equal(t, load(back)[k]) for k, t in f32_ours.items())
        check("sharded --export-hf loaded back (--load DIR)", same, err.strip()[-400:])
    rc, _, err = train("--use-checkpoint-args", "--load", os.path.join(WORK, "ours-llama-tiny.safetensors"),
                       "--skip-train", "--eval-iters", "0", "--export-hf", sharded_out)
    files = sorted(os.listdir(sharded_out))
    check("--export-hf over a sharded export: the shards and index removed",
          rc == 0 and files == ["config.json", "model.safetensors"], f"exit {rc}, {files}")

    # --export-dtype bf16 and fp16: --export and --export-hf hold the same weights rounded to the nearest, as
    # torch's .to() rounds them, and config.json's torch_dtype names the type.
    for flag, kind, torch_dtype in (("bf16", torch.bfloat16, "bfloat16"), ("fp16", torch.float16, "float16")):
        out_dir, ours_path = os.path.join(WORK, f"hf-{flag}"), os.path.join(WORK, f"ours-{flag}.safetensors")
        rc, _, err = train("--use-checkpoint-args", "--load", os.path.join(WORK, "ours-llama-tiny.safetensors"),
                           "--skip-train", "--eval-iters", "0", "--export-dtype", flag, "--export", ours_path,
                           "--export-hf", out_dir)
        if rc != 0:
            check(f"--export-dtype {flag}", False, err.strip()[-400:])
            continue
        for what, got, want in (("--export", load(ours_path), f32_ours),
                                ("--export-hf", load(os.path.join(out_dir, "model.safetensors")), f32_hf)):
            same = got.keys() == want.keys() and all(
                got[k].dtype == kind and torch.equal(got[k], t.to(kind)) for k, t in want.items())
            check(f"--export-dtype {flag}: {what} holds the fp32 weights rounded to {kind}", same)
        with open(os.path.join(out_dir, "config.json")) as f:
            check(f"--export-dtype {flag}: config.json's torch_dtype", json.load(f).get("torch_dtype") == torch_dtype)
    past_fp16 = gpt2_weights(gen)
    past_fp16["wte.weight"][3, 5] = 70000.0
    save(os.path.join(WORK, "past-fp16.safetensors"), past_fp16)
    fp16_out = os.path.join(WORK, "past-fp16-export.safetensors")
    if os.path.exists(fp16_out):
        os.remove(fp16_out)
    expect_error("a weight past fp16's range", [*gpt, "--load", os.path.join(WORK, "past-fp16.safetensors"),
                 "--skip-train", "--eval-iters", "0", "--export-dtype", "fp16", "--export", fp16_out], 1,
                 r"--export .*past-fp16-export\.safetensors: tensor 'wte' holds 70000 \(element 197\), past fp16's "
                 r"largest value 65504: export it as bf16 or fp32")
    check("a weight past fp16's range: no file left", not os.path.exists(fp16_out))
    expect_error("--export-dtype with nothing to export", [*gpt, "--export-dtype", "bf16"], 2,
                 r"--export-dtype: there is nothing to export")
    # With a dataset, the tokenizer srunway-prep wrote beside it goes along, and config.json names its end of text.
    corpus = os.path.join(WORK, "corpus.txt")
    with open(corpus, "w") as f:
        f.write("".join(f"document {i} says alpha beta gamma {i % 7} times\n\n" for i in range(200)))
    subprocess.run([PREP, "--input", corpus, "--output-prefix", os.path.join(WORK, "data"), "--train-vocab", "300",
                    "--quiet"], check=True, capture_output=True)
    out_dir = os.path.join(WORK, "hf-with-tokenizer")
    rc, _, err = train(*gpt, "--vocab-size", "300", "--train-steps", "1", "--export-hf", out_dir,
                       data=os.path.join(WORK, "data"))
    files = sorted(os.listdir(out_dir)) if os.path.isdir(out_dir) else []
    check("--export-hf with a dataset: its files", rc == 0 and files == [
        "config.json", "merges.txt", "model.safetensors", "tokenizer_config.json", "vocab.json"],
        f"exit {rc}, {files} {err.strip()[-300:]}")
    if rc == 0:
        same = all(open(os.path.join(WORK, f"data.{name}"), "rb").read() ==
                   open(os.path.join(out_dir, name), "rb").read() for name in ("vocab.json", "merges.txt"))
        check("--export-hf with a dataset: the tokenizer's files as srunway-prep wrote them", same)
        with open(os.path.join(out_dir, "vocab.json")) as f:
            eos = json.load(f)["<|endoftext|>"]
        with open(os.path.join(out_dir, "config.json")) as f:
            config = json.load(f)
        with open(os.path.join(out_dir, "tokenizer_config.json")) as f:
            tokenizer_config = json.load(f)
        check("--export-hf with a dataset: <|endoftext|> in config.json and tokenizer_config.json",
              config.get("eos_token_id") == eos and config.get("bos_token_id") == eos and
              tokenizer_config.get("tokenizer_class") == "GPT2Tokenizer" and
              tokenizer_config.get("eos_token") == "<|endoftext|>", f"{config} {tokenizer_config}")

    # A dataset whose tokenizer files are missing or broken exports the model alone, and the line says why.
    for case, vocab_text in (("no-tokenizer", None), ("bad-tokenizer", '{"a": 0}')):
        prefix = os.path.join(WORK, case)
        for ext in ("bin", "idx"):
            shutil.copyfile(os.path.join(WORK, f"data.{ext}"), f"{prefix}.{ext}")
        for ext in ("vocab.json", "merges.txt"):
            if os.path.exists(f"{prefix}.{ext}"):
                os.remove(f"{prefix}.{ext}")
        if vocab_text is not None:
            with open(f"{prefix}.vocab.json", "w") as f:
                f.write(vocab_text)
            shutil.copyfile(os.path.join(WORK, "data.merges.txt"), f"{prefix}.merges.txt")
        out_dir = os.path.join(WORK, f"hf-{case}")
        rc, _, err = train(*gpt, "--vocab-size", "300", "--train-steps", "1", "--export-hf", out_dir, data=prefix)
        files = sorted(os.listdir(out_dir)) if os.path.isdir(out_dir) else []
        why = (r"no tokenizer: none beside --data-path\)$" if vocab_text is None else
               r"no tokenizer: .*bad-tokenizer\.vocab\.json: byte 0 has no token; a byte-level vocabulary needs all "
               r"256\)$")
        said = [line for line in err.splitlines() if "exported the model to" in line]
        check(f"--export-hf with a dataset and {case}: the model alone, and why",
              rc == 0 and files == ["config.json", "model.safetensors"] and len(said) == 1 and
              re.search(why, said[0]) is not None, f"exit {rc}, {files}, {said or err.strip()[-300:]}")

    # Bad flags and files: one line each.
    expect_error("weights without --finetune or --skip-train", [*gpt, "--load", hf], 2,
                 r"--load .*gpt2-F32\.safetensors holds weights alone .* add --finetune")
    expect_error("another vocabulary", [*gpt, "--vocab-size", "600", "--load", hf, "--finetune"], 1,
                 r"gpt2-F32\.safetensors: wte\.weight \[512, 64\] is not the model's wte \[600, 64\] "
                 r"\(--vocab-size 512\)")
    expect_error("a GPT-2 file for a Llama", [*llama, "--load", hf, "--finetune"], 1,
                 r"holds a Hugging Face GPT-2 model, and this run's model is a llama")
    # Hugging Face's GPT-2 and Llama have their architecture's own norms: a model with the other's (--normalization)
    # takes neither's weights and has no class to export to.
    expect_error("a GPT-2 file for a GPT with RMSNorm", [*gpt, "--normalization", "RMSNorm", "--load", hf,
                 "--finetune"], 1, r"gpt2-F32\.safetensors holds a Hugging Face GPT-2 model, whose norms are "
                 r"LayerNorm, and this run's model is a gpt with RMSNorm \(--normalization\)$")
    expect_error("--export-hf of a GPT with RMSNorm", [*gpt, "--normalization", "RMSNorm", "--export-hf",
                 os.path.join(WORK, "hf-gpt-rmsnorm")], 1,
                 r"--export-hf: transformers' GPT-2 has LayerNorm norms, and this model's are RMSNorm")
    # A model without positions (--position-embedding-type none): GPT-2's learned table has no place in it, a Llama's
    # weights (RoPE has none) load into it, and neither has a Hugging Face class to export to.
    nope = ["--position-embedding-type", "none"]
    expect_error("a GPT-2 file for a GPT without positions", [*gpt, *nope, "--load", hf, "--finetune"], 1,
                 r"gpt2-F32\.safetensors holds a GPT-2 model, whose positions are a learned table \(wpe\.weight\), "
                 r"and this run's model has none \(--position-embedding-type none\)$")
    export = os.path.join(WORK, "nope.safetensors")
    rc, _, err = train(*llama, *nope, "--load", os.path.join(WORK, "llama-untied.safetensors"), "--skip-train",
                       "--eval-iters", "0", "--export", export)
    check("a Llama file loads into a Llama without positions",
          rc == 0 and exported_model(export).get("position_embedding_type") == "none", err.strip()[-300:])
    for name, model in (("GPT-2", gpt), ("Llama", llama)):
        expect_error(f"--export-hf of a {name} without positions", [*model, *nope, "--export-hf",
                     os.path.join(WORK, f"hf-{name}-nope")], 1,
                     rf"--export-hf: transformers' {name} has positions \((a learned table|RoPE)\), and this model "
                     r"has none \(--position-embedding-type none\): it has no Hugging Face class; --export writes "
                     r"its weights$")
    expect_error("--export-hf of a Llama that skips RoPE in a layer", [*llama, "--no-rope-freq", "2", "--export-hf",
                 os.path.join(WORK, "hf-llama-no-rope")], 1,
                 r"--export-hf: transformers' Llama turns RoPE in every layer, and this model skips it in some "
                 r"\(--no-rope-freq\): it has no Hugging Face class; --export writes its weights$")
    expect_error("--export-hf of a GPT with a sliding window", [*gpt, "--window-size", "8,0", "--export-hf",
                 os.path.join(WORK, "hf-gpt-window")], 1,
                 r"--export-hf: the Hugging Face GPT-2 configs written here attend to every key before each query, and "
                 r"this model through a window of 8 \(--window-size\): --export writes its weights$")
    # Attention with a sink (--softmax-type): neither transformers class has one to export to, and a Hugging Face file
    # holds no learned sinks for a model that learns them (off-by-one's are no weights: its file loads).
    for name, model, kind in (("GPT-2", gpt, "off-by-one"), ("Llama", llama, "learnable")):
        expect_error(f"--export-hf of a {name} with --softmax-type {kind}",
                     [*model, "--softmax-type", kind, "--export-hf", os.path.join(WORK, f"hf-{name}-{kind}")], 1,
                     rf"--export-hf: transformers' {name} has a plain softmax in its attention, and this model's has "
                     rf"a sink \(--softmax-type {kind}\): it has no Hugging Face class; --export writes its weights$")
    expect_error("--export-hf of a Llama with quick GEGLU",
                 [*llama, "--quick-geglu", "--export-hf", os.path.join(WORK, "hf-llama-quick-geglu")], 1,
                 r"--export-hf: transformers' Llama's FFN is SwiGLU, silu\(gate\) \* up, and this model's is not "
                 r"\(--quick-geglu, --glu-linear-offset, --activation-func-clamp-value\): it has no Hugging Face "
                 r"class; --export writes its weights$")
    expect_error("a Llama file for a Llama that learns sinks",
                 [*llama, "--softmax-type", "learnable", "--load", os.path.join(WORK, "llama-untied.safetensors"),
                  "--finetune"], 1,
                 r"llama-untied\.safetensors holds a Hugging Face Llama model, which has no attention sinks, and this "
                 r"run's model learns them \(--softmax-type learnable, layers\.N\.softmax_offset\)$")
    export = os.path.join(WORK, "off-by-one.safetensors")
    rc, _, err = train(*gpt, "--softmax-type", "off-by-one", "--load", hf, "--skip-train", "--eval-iters", "0",
                       "--export", export)
    check("a GPT-2 file loads into a GPT with an off-by-one softmax",
          rc == 0 and exported_model(export).get("softmax_type") == "off-by-one", err.strip()[-300:])
    deeper = os.path.join(WORK, "gpt2-3-layers.safetensors")
    save(deeper, gpt2_weights(gen, layers=3))
    expect_error("a file of more layers", [*gpt, "--load", deeper, "--finetune"], 1,
                 r"12 tensors the model has no place for \(h\.2\.")
    swapped = llama_weights(gen)  # q and k of each other's sizes: their sum is right, each part is not
    for l in range(LAYERS):
        attn = f"model.layers.{l}.self_attn."
        swapped[attn + "q_proj.weight"], swapped[attn + "k_proj.weight"] = (swapped[attn + "k_proj.weight"],
                                                                          swapped[attn + "q_proj.weight"])
    save(os.path.join(WORK, "swapped.safetensors"), swapped)
    expect_error("q and k of each other's sizes", [*llama, "--load", os.path.join(WORK, "swapped.safetensors"),
                 "--finetune"], 1, r"q_proj\.weight \+ .*k_proj\.weight \+ .*v_proj\.weight \[32, 64\] \+ \[64, 64\] "
                 r"\+ \[32, 64\] are not the model's layers\.0\.qkv\.weight \[128, 64\]")
    untied = dict(lm)
    untied["lm_head.weight"] = lm["transformer.wte.weight"] + 0.01
    save(os.path.join(WORK, "untied.safetensors"), untied)
    expect_error("a GPT-2 whose lm_head is not its embedding",
                 [*gpt, "--load", os.path.join(WORK, "untied.safetensors"), "--finetune"], 1,
                 r"untied\.safetensors: lm_head\.weight is not transformer\.wte\.weight: the file's head is its own")
    ints = os.path.join(WORK, "ints.safetensors")
    with open(ints, "wb") as f:
        body = json.dumps({"wte.weight": {"dtype": "I32", "shape": [1], "data_offsets": [0, 4]}}).encode()
        body += b" " * ((8 - len(body) % 8) % 8)
        f.write(len(body).to_bytes(8, "little") + body + b"\0\0\0\0")
    expect_error("an integer tensor", [*gpt, "--load", ints, "--finetune"], 1, r"'wte\.weight' is I32, not a float")
    expect_error("a file of neither naming", [*gpt, "--load", index.replace("model.safetensors.index.json",
                 "model-00002-of-00002.safetensors"), "--finetune"], 1,
                 r"neither srunway-train's --export nor a Hugging Face GPT-2 or Llama model")
    missing = os.path.join(sharded, "missing.safetensors.index.json")
    with open(missing, "w") as f:
        json.dump({"weight_map": {"model.embed_tokens.weight": "model-00003-of-00002.safetensors"}}, f)
    expect_error("an index naming a file that is not there", [*llama, "--load", missing, "--finetune"], 1,
                 r"model-00003-of-00002\.safetensors: No such file .*\(named by .*missing\.safetensors\.index\.json\)")
    if failures:
        print(f"{len(failures)} checks failed: {', '.join(failures)}")
        sys.exit(1)
    print("Hugging Face GPT-2 and Llama weights load as PyTorch computes them")


if __name__ == "__main__":
    main()
