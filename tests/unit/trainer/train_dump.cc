// What srunway-train starts from, for PyTorch to start from the same place (trainer/steps_vs_torch on the CPU,
// the gpu suite's train_vs_torch): the initial parameters srunway-train draws from --seed, and the tokens of every
// sample it trains on, in order, as its own code builds them (one rank, no gradient accumulation).
// Usage: trainer-train-dump PRESET DATA_PREFIX SEQ BATCH STEPS SEED OUT_DIR
//   OUT_DIR/init.safetensors  every parameter (fp32), the model config and each tensor's weight decay in __metadata__
//   OUT_DIR/tokens.bin        STEPS x BATCH samples of SEQ + 1 int32 tokens (inputs, then the shifted targets)
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/parse.h"
#include "trainer/ckpt/safetensors.h"
#include "trainer/data/samples.h"
#include "trainer/model/config.h"
#include "trainer/model/params.h"
#include "trainer/model/rng.h"

namespace srunway::trainer {
namespace {

common::Status Dump(int argc, char** argv) {
  if (argc != 8) return common::InvalidArgument("usage: trainer-train-dump PRESET DATA_PREFIX SEQ BATCH STEPS SEED OUT_DIR");
  SRUNWAY_ASSIGN_OR_RETURN(ModelConfig config, Preset(argv[1]));
  SRUNWAY_ASSIGN_OR_RETURN(int64_t seq, common::ParseInt(argv[3], "SEQ", 1, config.seq_len));
  SRUNWAY_ASSIGN_OR_RETURN(int64_t batch, common::ParseInt(argv[4], "BATCH", 1, 4096));
  SRUNWAY_ASSIGN_OR_RETURN(int64_t steps, common::ParseInt(argv[5], "STEPS", 1, 1'000'000));
  SRUNWAY_ASSIGN_OR_RETURN(int64_t seed, common::ParseInt(argv[6], "SEED", 0, INT64_MAX));
  const std::filesystem::path out = argv[7];

  // As Trainer::InitOrLoad: the generator seeded with --seed, then Megatron's initialisation.
  const ParamLayout layout(config);
  std::vector<float> params(static_cast<size_t>(layout.numel()));
  Rng rng(static_cast<uint64_t>(seed));
  InitParams(config, layout, rng, params);
  std::vector<NamedTensor> tensors;
  common::Json decay = common::Json::object();
  for (const TensorSpec& spec : layout.tensors()) {
    tensors.push_back({spec.name, spec.shape, params.data() + spec.offset});
    decay[spec.name] = spec.decay;
  }
  SRUNWAY_RETURN_IF_ERROR(WriteSafetensors(out / "init.safetensors", tensors,
                                           {{"config", ToJson(config).dump()}, {"decay", decay.dump()}}));

  // As Trainer::Setup and Loop: the training split holds steps x batch samples; step s takes s x batch onwards.
  DataConfig data;
  data.data_path = {argv[2]};
  data.split = "1";
  data.seq_len = static_cast<int>(seq);
  data.vocab = config.vocab;
  data.seed = static_cast<uint64_t>(seed);
  SRUNWAY_ASSIGN_OR_RETURN(auto samples, BuildSamples(data, Split::kTrain, steps * batch));
  std::ofstream file(out / "tokens.bin", std::ios::binary);
  std::vector<int32_t> sample;
  for (int64_t i = 0; i < steps * batch; ++i) {
    SRUNWAY_RETURN_IF_ERROR(samples->Sample(i, sample));
    file.write(reinterpret_cast<const char*>(sample.data()), static_cast<std::streamsize>((seq + 1) * sizeof(int32_t)));
  }
  if (!file.flush()) return common::ErrnoStatus(errno, "write " + (out / "tokens.bin").string());
  return common::Status::Ok();
}

}  // namespace
}  // namespace srunway::trainer

int main(int argc, char** argv) {
  const srunway::common::Status status = srunway::trainer::Dump(argc, argv);
  if (!status.ok()) {
    std::fprintf(stderr, "trainer-train-dump: %s\n", status.message().c_str());
    return 1;
  }
  return 0;
}
