// libFuzzer target: any vocab.json and merges.txt (srunway-prep's --vocab-file and --merge-file, the tokenizer
// beside a dataset) are refused with a message or give a tokenizer whose tokens of any text are ids of its
// vocabulary and decode back to that text (as text to show: UTF-8 throughout). The input is the vocabulary, a NUL,
// the merges, a NUL, the text.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tests/fuzz/nul_parts.h"
#include "trainer/data/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using srunway::trainer::Tokenizer;
  const auto parts = srunway::fuzz::NulParts(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!parts) return 0;
  const auto [vocab, merges, text] = *parts;
  auto tokenizer = Tokenizer::Parse(vocab, "vocab.json", merges, "merges.txt");
  if (!tokenizer.ok()) {
    if (tokenizer.status().message().empty()) std::abort();
    return 0;
  }
  const std::vector<int32_t> ids = tokenizer->Encode(text);
  for (int32_t id : ids) {
    if (id < 0 || id >= tokenizer->vocab_size()) std::abort();
  }
  if (tokenizer->Decode(ids) != text) std::abort();
  // As text to show: UTF-8 (made so again, it stays the same), and the text itself where that was UTF-8.
  const std::string shown = tokenizer->DecodeText(ids);
  if (srunway::trainer::ValidUtf8(shown) != shown) std::abort();
  if (srunway::trainer::ValidUtf8(text) == text && shown != text) std::abort();
  return 0;
}
