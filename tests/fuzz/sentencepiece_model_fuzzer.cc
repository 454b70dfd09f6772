// libFuzzer target: any SentencePiece model file (srunway-prep's and srunway-train's --tokenizer-model with
// --tokenizer-type Llama2Tokenizer or GPTSentencePieceTokenizer, PREFIX.tokenizer.model beside a dataset) is refused
// with a message, or gives a tokenizer whose tokens of any text (a fixed one, and the input's own bytes) are ids of
// its vocabulary and decode without fault; its end of document and beginning are ids of the vocabulary or -1.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "trainer/data/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using srunway::trainer::Tokenizer;
  const std::string_view model(reinterpret_cast<const char*>(data), size);
  auto tokenizer = Tokenizer::ParseSentencePiece(model, "", "tokenizer.model");
  if (!tokenizer.ok()) {
    if (tokenizer.status().message().empty()) std::abort();
    return 0;
  }
  for (int32_t id : {tokenizer->eod(), tokenizer->bos()}) {
    if (id < -1 || id >= tokenizer->vocab_size()) std::abort();
  }
  for (std::string_view text : {std::string_view("  Hello  world\t\xe6\x97\xa5 <0x41> <s>x "), model}) {
    const std::vector<int32_t> ids = tokenizer->Encode(text);
    for (int32_t id : ids) {
      if (id < 0 || id >= tokenizer->vocab_size()) std::abort();
    }
    (void)tokenizer->Decode(ids);
    (void)tokenizer->Decode(ids, /*continues=*/true);
    (void)tokenizer->DecodeDocument(ids);
  }
  return 0;
}
