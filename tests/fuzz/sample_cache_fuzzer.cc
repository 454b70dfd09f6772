// libFuzzer target: a --data-cache-path file whose header is the run's and whose tables hold anything (a damaged
// file) is refused sample by sample with a message naming it, or gives samples of the data: seq_len + 1 tokens of
// the dataset, below the vocabulary; never a read outside the data. The input: a byte that picks one dataset or a
// blend of two, then the tables' bytes (cut, or padded with zeros, to the sizes the header names).
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "trainer/data/indexed_dataset.h"
#include "trainer/data/samples.h"

namespace {

namespace fs = std::filesystem;
using srunway::trainer::CachedSamples;
using srunway::trainer::DataConfig;
using srunway::trainer::SamplePlan;

constexpr int kSeqLen = 8, kVocab = 1000;
constexpr int64_t kSamples = 40;

// A plan, and the header of its cache file as the trainer writes it.
struct Case {
  SamplePlan plan;
  fs::path file;
  std::string header;
  size_t table_bytes = 0;
};

std::string Prefix(const fs::path& dir, const std::string& name, const std::vector<int>& lengths) {
  const std::string prefix = (dir / name).string();
  auto writer = srunway::trainer::IndexedDatasetWriter::Create(prefix, kVocab);
  if (!writer.ok()) std::abort();
  for (size_t d = 0; d < lengths.size(); ++d) {
    std::vector<int32_t> doc(lengths[d]);
    for (int t = 0; t < lengths[d]; ++t) doc[t] = static_cast<int32_t>((100 * d + t) % kVocab);
    if (!writer->AddDocument(doc).ok()) std::abort();
  }
  if (!writer->Finish().ok()) std::abort();
  return prefix;
}

Case Make(const fs::path& dir, std::vector<std::string> data_path) {
  DataConfig config;
  config.data_path = std::move(data_path);
  config.split = "1";
  config.seq_len = kSeqLen;
  config.vocab = kVocab;
  auto plan = srunway::trainer::PlanSamples(config, srunway::trainer::Split::kTrain, kSamples);
  if (!plan.ok() || !CachedSamples(*plan, dir, true).ok()) std::abort();
  Case made{*plan, srunway::trainer::SampleCachePath(*plan, dir), {}, 0};
  std::ifstream in(made.file, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // "SRWYSIDX", the fingerprint, the table count, each table's bytes; padded to 8 bytes.
  uint64_t tables = 0;
  __builtin_memcpy(&tables, bytes.data() + 16, sizeof tables);
  const size_t header = (24 + 8 * tables + 7) & ~size_t{7};
  made.header = bytes.substr(0, header);
  made.table_bytes = bytes.size() - header;
  return made;
}

struct Fixture {
  fs::path dir = fs::temp_directory_path() / ("srunway-sample-cache-fuzz-" + std::to_string(getpid()));
  std::vector<Case> cases;
  Fixture() {
    fs::create_directories(dir);
    const std::string a = Prefix(dir, "a", {5, 17, 1, 40, 9, 33, 12}), b = Prefix(dir, "b", {50, 3, 21});
    cases.push_back(Make(dir, {a}));
    cases.push_back(Make(dir, {"0.6", a, "0.4", b}));
  }
  ~Fixture() {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture fixture;
  if (size == 0) return 0;
  const Case& test = fixture.cases[data[0] % fixture.cases.size()];
  std::string tables(reinterpret_cast<const char*>(data + 1), size - 1);
  tables.resize(test.table_bytes, '\0');
  {
    std::ofstream out(test.file, std::ios::binary | std::ios::trunc);
    out << test.header << tables;
    if (!out.flush()) std::abort();
  }
  auto samples = CachedSamples(test.plan, fixture.dir, false);
  if (!samples.ok()) std::abort();  // the header is the plan's and the sizes are right: it is mapped
  std::vector<int32_t> sample;
  for (int64_t i = 0; i < 2 * kSamples; ++i) {
    const srunway::common::Status status = (*samples)->Sample(i, sample);
    if (!status.ok()) {
      if (status.message().find(test.file.string() + ": sample ") != 0) std::abort();
      continue;
    }
    if (sample.size() != kSeqLen + 1) std::abort();
    for (int32_t token : sample) {
      if (token < 0 || token >= kVocab) std::abort();
    }
  }
  return 0;
}
