// libFuzzer target: any tokenizer.json and tokenizer_config.json (srunway-prep's and srunway-train's
// --tokenizer-model, the tokenizer beside a dataset) are refused with a message, or give a tokenizer whose tokens
// of any text are ids of its vocabulary and decode without fault; its end of document and beginning are ids of the
// vocabulary or -1. The input is tokenizer.json, a NUL, tokenizer_config.json, a NUL, the text.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "tests/fuzz/nul_parts.h"
#include "trainer/data/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using srunway::trainer::Tokenizer;
  const auto parts = srunway::fuzz::NulParts(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!parts) return 0;
  const auto [json, config, text] = *parts;
  auto tokenizer = Tokenizer::ParseHuggingFace(json, config, "tokenizer.json");
  if (!tokenizer.ok()) {
    if (tokenizer.status().message().empty()) std::abort();
    return 0;
  }
  for (int32_t id : {tokenizer->eod(), tokenizer->bos()}) {
    if (id < -1 || id >= tokenizer->vocab_size()) std::abort();
  }
  const std::vector<int32_t> ids = tokenizer->Encode(text);
  for (int32_t id : ids) {
    if (id < 0 || id >= tokenizer->vocab_size()) std::abort();
  }
  (void)tokenizer->Decode(ids);
  (void)tokenizer->Decode(ids, /*continues=*/true);
  (void)tokenizer->DecodeDocument(ids);
  return 0;
}
