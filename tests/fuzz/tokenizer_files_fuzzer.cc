// libFuzzer target: any vocab.json and merges.txt (srunway-prep's --vocab-file and --merge-file, the tokenizer
// beside a dataset) are refused with a message or give a tokenizer whose tokens of any text are ids of its
// vocabulary and decode back to that text. The input is the vocabulary, a NUL, the merges, a NUL, the text.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "trainer/data/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using srunway::trainer::Tokenizer;
  std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t first = input.find('\0');
  if (first == std::string_view::npos) return 0;
  const size_t second = input.find('\0', first + 1);
  if (second == std::string_view::npos) return 0;
  auto tokenizer = Tokenizer::Parse(input.substr(0, first), "vocab.json", input.substr(first + 1, second - first - 1),
                                    "merges.txt");
  if (!tokenizer.ok()) {
    if (tokenizer.status().message().empty()) std::abort();
    return 0;
  }
  const std::string_view text = input.substr(second + 1);
  const std::vector<int32_t> ids = tokenizer->Encode(text);
  for (int32_t id : ids) {
    if (id < 0 || id >= tokenizer->vocab_size()) std::abort();
  }
  if (tokenizer->Decode(ids) != text) std::abort();
  return 0;
}
