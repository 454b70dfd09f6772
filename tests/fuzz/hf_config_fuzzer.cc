// libFuzzer target: any text as a Hugging Face config.json (--use-checkpoint-args beside a model.safetensors) is
// refused with a message or gives a model; a model that passes Validate is written back by --export-hf's
// HuggingFaceConfig as a config.json that reads as the same model.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/json.h"
#include "trainer/ckpt/weights.h"
#include "trainer/model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace srunway;
  auto json = common::ParseJson(std::string_view(reinterpret_cast<const char*>(data), size), "config.json");
  if (!json.ok()) return 0;
  auto model = trainer::FromHuggingFaceConfig(*json, "config.json");
  if (!model.ok()) {
    if (model.status().message().empty()) std::abort();
    return 0;
  }
  if (!trainer::Validate(*model).ok()) return 0;
  auto again = trainer::FromHuggingFaceConfig(trainer::HuggingFaceConfig(*model), "exported config.json");
  if (!again.ok() || !(*again == *model)) std::abort();
  return 0;
}
