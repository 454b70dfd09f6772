// Weights alone, in safetensors files. In, for --finetune and --skip-train: srunway-train's own --export, or a
// Hugging Face GPT-2 or Llama-family model as the hub holds it (model.safetensors, or model.safetensors.index.json and
// the files it names, with config.json beside them). Out, for --export-hf: the same names and layouts again.
//
// Hugging Face's names map onto ours as follows (L = layer):
//   GPT-2 ([transformer.] prefix optional)   srunway
//   wte.weight, wpe.weight                   wte, wpe (the file's extra positions beyond the model's are left out)
//   h.L.ln_1, h.L.ln_2, ln_f                 layers.L.norm1, layers.L.norm2, norm_f
//   h.L.attn.c_attn, h.L.attn.c_proj         layers.L.qkv, layers.L.proj   (Conv1D [in, out]: transposed)
//   h.L.mlp.c_fc, h.L.mlp.c_proj             layers.L.fc, layers.L.out     (likewise)
//   h.L.attn.bias, .masked_bias              not parameters (masks)
//   lm_head                                  lm_head (below)
//   Llama
//   model.embed_tokens                       wte
//   model.layers.L.self_attn.{q,k,v}_proj    layers.L.qkv (stacked: q, then k, then v; Qwen2's biases likewise)
//   model.layers.L.self_attn.o_proj          layers.L.proj
//   model.layers.L.mlp.{gate,up}_proj        layers.L.fc (stacked: gate, then up)
//   Phi-3's model.layers.L.self_attn.qkv_proj and model.layers.L.mlp.gate_up_proj are layers.L.qkv and layers.L.fc
//   as they are (stacked so already), GLM's gate_up_proj likewise; their other names are Llama's.
//   model.layers.L.mlp.down_proj             layers.L.out
//   model.layers.L.{input,post_attention}_layernorm, model.norm   layers.L.norm1, layers.L.norm2, norm_f
//   Nemotron's (a GPT with RoPE) are these, the norms with their biases, and one model.layers.L.mlp.up_proj for
//   layers.L.fc; its norms' and Gemma's weights are stored less 1.
//   lm_head                                  lm_head (below)
// Both use the rotary and GELU conventions of our model (rotate-half RoPE, tanh GELU), so nothing else changes. The
// head, lm_head.weight in either (and in srunway's), is absent from a file whose model ties it to the embedding (as
// save_pretrained writes one); a model that ties its head reads a file's lm_head.weight only where it is the
// embedding again, and an untied model takes the embedding's copy from a file without one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "trainer/ckpt/safetensors.h"
#include "trainer/model/config.h"

namespace srunway::trainer {

// The weights file --load names, if it names weights rather than a checkpoint: a file whose name ends in
// .safetensors or .safetensors.index.json, or a Hugging Face model's folder (what from_pretrained takes) that holds
// model.safetensors.index.json or model.safetensors and no checkpoint.
std::optional<std::filesystem::path> WeightsFile(const std::filesystem::path& load);

struct ImportedWeights {
  std::string naming;              // "srunway", "Hugging Face GPT-2" or "Hugging Face Llama"
  std::vector<std::string> notes;  // what was adapted: positions left out, a tied head copied
};

// Fills `params` (the model's flat fp32 buffer, laid out as ParamLayout(config)) from the file's tensors, of any
// float dtype (F32, F16, BF16, F64). Every parameter must be found with the model's shape; a tensor the model
// has no place for is an error too (the file is of another model), except the buffers listed above. Errors name
// the file and the tensor. A config.json of the file's family beside it is held to the file where it says whether
// the head is tied (tie_word_embeddings): a head that differs from a tied embedding and no head where it is untied
// are errors, as is a head of its own for a model that ties it.
common::StatusOr<ImportedWeights> ImportWeights(const std::filesystem::path& path, const ModelConfig& config,
                                                std::span<float> params);

// --export-hf: DIR/model.safetensors in Hugging Face's names and layouts (as `dtype`) and DIR/config.json, for
// transformers' GPT2LMHeadModel, LlamaForCausalLM or the Llama family's class (HuggingFaceConfig)
// .from_pretrained(DIR), from the model's whole fp32 parameters.
// With `tokenizer`, also its vocab.json and merges.txt and a tokenizer_config.json (GPT2Tokenizer, whose format
// srunway-prep's byte-level BPE has), or a Hugging Face tokenizer's tokenizer.json and tokenizer_config.json as they
// were read, or a SentencePiece model's tokenizer.model and a tokenizer_config.json (LlamaTokenizer); config.json
// names its begin and end tokens.
struct HfTokenizer {
  std::string vocab_json, merges_txt;  // GPT-2's files' contents, or:
  std::string tokenizer_json, tokenizer_config;  // a Hugging Face tokenizer's (the config may be empty: none), or
  std::string tokenizer_model;                   // a SentencePiece model's, with tokenizer_config (LlamaTokenizer)
  int32_t bos = -1, eos = -1;  // -1: none
};
// How the weights are stored: their dtype, and the largest file (save_pretrained's max_shard_size, 5 GB, as its
// default): a model past it is written as model-0000K-of-0000N.safetensors files (a tensor larger than that alone
// in its own) and model.safetensors.index.json naming each tensor's file. Weight files of the other form left in
// DIR by an earlier export are removed, since from_pretrained would take model.safetensors before an index.
struct HfExport {
  StoredDtype dtype = StoredDtype::kF32;
  uint64_t max_shard_bytes = 5'000'000'000;
};
common::Status ExportHuggingFace(const std::filesystem::path& dir, const ModelConfig& config,
                                 std::span<const float> params, const std::optional<HfTokenizer>& tokenizer,
                                 const HfExport& how = {});

// Hugging Face's config.json of a GPT-2 or Llama model as our ModelConfig (not yet Validate()d); a setting our
// model does not have is refused, naming it and `where`.
common::StatusOr<ModelConfig> FromHuggingFaceConfig(const common::Json& json, const std::string& where);
// Our model as Hugging Face's config.json describes it (GPT2LMHeadModel, LlamaForCausalLM, Qwen2ForCausalLM for
// a Llama with qkv_bias, Qwen3ForCausalLM for one with qk_norm, GemmaForCausalLM for one with GeGLU, and the others
// weights.cc's ExportClass names; its torch_dtype that of the weights), for --export-hf; FromHuggingFaceConfig reads
// it back as the same model.
common::Json HuggingFaceConfig(const ModelConfig& config, StoredDtype dtype = StoredDtype::kF32);
// Ok when transformers has a class for the model (not for a GPT with qk_norm, nor a Llama with qk_norm and
// qkv_bias); else why not. ExportHuggingFace checks it first.
common::Status HuggingFaceExportable(const ModelConfig& config);
// Its class in transformers: config.json's architectures.
std::string HuggingFaceArchitecture(const ModelConfig& config);

// The model the weights are of, for --use-checkpoint-args: what srunway-train's --export recorded in the header,
// else the config.json beside a Hugging Face file (GPT-2 or Llama; a setting our model lacks, such as RoPE
// scaling or another activation, is an error naming it).
common::StatusOr<ModelConfig> WeightsModel(const std::filesystem::path& path);

}  // namespace srunway::trainer
