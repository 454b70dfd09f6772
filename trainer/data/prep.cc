// Text or JSONL -> tokenizer -> Megatron .bin/.idx, in batches spread over worker threads.
#include "trainer/data/prep.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <thread>
#include <unordered_map>

#include "common/json.h"
#include "common/parse.h"
#include "common/log.h"
#include "common/signals.h"
#include "trainer/data/indexed_dataset.h"
#include "trainer/data/samples.h"
#include "trainer/data/tokenizer.h"

namespace srunway::trainer {
namespace {

constexpr size_t kBatchBytes = 4 << 20;

// Streams documents: JSONL lines (the values of the chosen keys, concatenated), or text split at separator lines.
class DocumentReader {
 public:
  static common::StatusOr<std::unique_ptr<DocumentReader>> Open(const PrepOptions& options) {
    FILE* file = std::fopen(options.input.c_str(), "re");
    if (file == nullptr) return common::ErrnoStatus(errno, "--input " + options.input);
    auto reader = std::unique_ptr<DocumentReader>(new DocumentReader(options, file));
    std::error_code ec;
    reader->total_bytes_ = static_cast<int64_t>(std::filesystem::file_size(options.input, ec));
    return reader;
  }
  ~DocumentReader() {
    std::fclose(file_);
    std::free(line_);
  }

  // Replaces `batch` with the next documents (about kBatchBytes); false at the end of the input.
  common::StatusOr<bool> Next(std::vector<std::string>& batch) {
    batch.clear();
    size_t bytes = 0;
    std::string current;
    bool in_document = false;
    while (bytes < kBatchBytes) {
      errno = 0;
      const ssize_t n = ::getline(&line_, &capacity_, file_);
      if (n < 0) {
        if (errno != 0) return common::ErrnoStatus(errno, "--input " + options_.input);
        break;
      }
      ++line_number_;
      bytes_read_ += n;
      std::string_view line(line_, static_cast<size_t>(n));
      if (jsonl_) {
        if (common::Trim(line).empty()) continue;
        SRUNWAY_ASSIGN_OR_RETURN(
            std::string text,
            JsonlDocument(line, options_.json_keys, fmt::format("{}:{}", options_.input, line_number_)));
        bytes += text.size();
        batch.push_back(std::move(text));
        continue;
      }
      std::string_view bare = line;
      if (bare.ends_with('\n')) bare.remove_suffix(1);
      if (bare.ends_with('\r')) bare.remove_suffix(1);
      const bool separator = options_.document_separator.empty() ? common::Trim(bare).empty()
                                                                 : bare == options_.document_separator;
      if (separator) {
        if (in_document) {
          bytes += current.size();
          batch.push_back(std::move(current));
          current.clear();
          in_document = false;
        }
        continue;
      }
      current.append(line);
      in_document = true;
    }
    if (in_document) batch.push_back(std::move(current));
    return !batch.empty();
  }

  int64_t bytes_read() const { return bytes_read_; }
  int64_t total_bytes() const { return total_bytes_; }

 private:
  DocumentReader(const PrepOptions& options, FILE* file)
      : options_(options), file_(file),
        jsonl_(IsJsonlInput(options)) {}

  PrepOptions options_;
  FILE* file_;
  bool jsonl_;
  char* line_ = nullptr;
  size_t capacity_ = 0;
  int64_t line_number_ = 0;
  int64_t bytes_read_ = 0;
  int64_t total_bytes_ = 0;
};

// Runs fn(first, last) over `count` items split into `workers` contiguous slices.
template <typename Fn>
void ParallelSlices(size_t count, int workers, Fn fn) {
  const size_t slices = std::max<size_t>(1, std::min<size_t>(static_cast<size_t>(workers), count));
  std::vector<std::thread> threads;
  for (size_t s = 0; s < slices; ++s) {
    const size_t first = count * s / slices, last = count * (s + 1) / slices;
    threads.emplace_back([=, &fn] { fn(s, first, last); });
  }
  for (std::thread& thread : threads) thread.join();
}

class Progress {
 public:
  Progress(bool enabled, std::string what) : enabled_(enabled), tty_(::isatty(2)), what_(std::move(what)) {}
  void Update(int64_t done, int64_t total) {
    if (!enabled_ || total <= 0) return;
    const int percent = static_cast<int>(100 * std::min(done, total) / total);
    if (tty_) {
      const int filled = percent / 4;
      fmt::print(stderr, "\r{:<10} [{:#<{}}{: <{}}] {:3}%", what_, "", filled, "", 25 - filled, percent);
    } else if (percent / 25 > last_quarter_) {
      last_quarter_ = percent / 25;
      fmt::print(stderr, "{}: {}%\n", what_, percent);
    }
  }
  void Done() {
    if (enabled_ && tty_) fmt::print(stderr, "\n");
  }

 private:
  bool enabled_, tty_;
  std::string what_;
  int last_quarter_ = -1;
};

// Aborted once the options' stop flag is set: checked between batches and merges. `during` says where it stopped
// when that is worth saying (" while learning the vocabulary (...)").
common::Status CheckStop(const PrepOptions& options, std::string_view during = "") {
  if (options.stop == nullptr || *options.stop == 0) return common::Status::Ok();
  return common::Aborted("stopped by {}{}; {}.bin and {}.idx not written", common::SignalName(*options.stop), during,
                         options.output_prefix, options.output_prefix);
}

common::StatusOr<Tokenizer> TrainTokenizer(const PrepOptions& options) {
  SRUNWAY_ASSIGN_OR_RETURN(auto reader, DocumentReader::Open(options));
  std::unordered_map<std::string, int64_t> counts;
  std::vector<std::string> batch;
  Progress progress(options.progress, "counting");
  while (true) {
    SRUNWAY_RETURN_IF_ERROR(CheckStop(options));
    SRUNWAY_ASSIGN_OR_RETURN(bool more, reader->Next(batch));
    if (!more) break;
    std::vector<std::unordered_map<std::string, int64_t>> partial(options.workers);
    ParallelSlices(batch.size(), options.workers, [&](size_t slice, size_t first, size_t last) {
      for (size_t d = first; d < last; ++d) {
        SplitWords(batch[d], [&](std::string_view word) { ++partial[slice][std::string(word)]; });
      }
    });
    for (auto& part : partial) {
      for (auto& [word, count] : part) counts[word] += count;
    }
    progress.Update(reader->bytes_read(), reader->total_bytes());
  }
  progress.Done();
  Progress merging(options.progress, "merging");
  // A signal is acted on between merges too: learning a large vocabulary from a large corpus takes minutes.
  auto tokenizer = Tokenizer::Train(counts, options.train_vocab, [&](int done, int wanted) {
    merging.Update(done, wanted);
    return CheckStop(options).ok();
  });
  if (!tokenizer.ok() && tokenizer.status().code() == common::StatusCode::kAborted) {
    SRUNWAY_RETURN_IF_ERROR(
        CheckStop(options, fmt::format(" while learning the vocabulary ({})", tokenizer.status().message())));
  }
  merging.Done();
  SRUNWAY_RETURN_IF_ERROR(CheckStop(options));
  return tokenizer;
}

}  // namespace

common::StatusOr<std::string> JsonlDocument(std::string_view line, const std::vector<std::string>& keys,
                                            std::string_view where) {
  SRUNWAY_ASSIGN_OR_RETURN(common::Json json, common::ParseJson(line, where));
  if (!json.is_object()) return common::InvalidArgument("{}: expected a JSON object, got {}", where, json.type_name());
  std::string text;
  for (const std::string& key : keys) {
    SRUNWAY_ASSIGN_OR_RETURN(std::string value, common::JsonField<std::string>(json, key, where));
    text += value;
  }
  return text;
}

bool IsJsonlInput(const PrepOptions& options) {
  if (options.input_format != "auto") return options.input_format == "jsonl";
  return options.input.ends_with(".jsonl") || options.input.ends_with(".json");
}

common::Status CheckPrepOptions(const PrepOptions& options) {
  if (options.input.empty()) return common::InvalidArgument("--input is required");
  if (options.output_prefix.empty()) return common::InvalidArgument("--output-prefix is required");
  // Checked before hours of tokenizing rather than at the first write.
  const std::filesystem::path prefix(options.output_prefix);
  const std::string name = prefix.filename().string();
  if (name.empty() || name == "." || name == "..") {
    return common::InvalidArgument("--output-prefix {}: names a directory; give DIR/NAME (DIR/NAME.bin, .idx, ...)",
                                   options.output_prefix);
  }
  const std::filesystem::path dir = prefix.has_parent_path() ? prefix.parent_path() : ".";
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) {
    return common::InvalidArgument("--output-prefix {}: {} is not a directory", options.output_prefix, dir.string());
  }
  if (::access(dir.c_str(), W_OK) != 0) {
    return common::InvalidArgument("--output-prefix {}: cannot write in {}: {}", options.output_prefix, dir.string(),
                                   std::strerror(errno));
  }
  for (const char* suffix : {".bin", ".idx", ".vocab.json", ".merges.txt", ".tokenizer.json", ".tokenizer.model",
                             ".tokenizer_config.json"}) {
    if (std::filesystem::is_directory(options.output_prefix + suffix, error)) {
      return common::InvalidArgument("--output-prefix {}: {}{} is a directory, where the output goes",
                                     options.output_prefix, options.output_prefix, suffix);
    }
  }
  if (options.workers < 1) return common::InvalidArgument("--workers must be at least 1, got {}", options.workers);
  const bool load = !options.vocab_file.empty() || !options.merge_file.empty();
  const bool hugging_face = !options.tokenizer_model.empty();
  if (int{load} + int{hugging_face} + int{options.train_vocab > 0} != 1) {
    return common::InvalidArgument("give one tokenizer: --vocab-file and --merge-file, --tokenizer-model (a Hugging "
                                   "Face tokenizer.json or a SentencePiece model, or its directory), or --train-vocab "
                                   "N");
  }
  if (load && (options.vocab_file.empty() || options.merge_file.empty())) {
    return common::InvalidArgument("--vocab-file and --merge-file go together");
  }
  // Learning a vocabulary reads the input once and encoding reads it again; a pipe (`--input /dev/stdin`,
  // `<(zcat ...)`) gives nothing the second time, and the run ended in "no documents" after the whole vocabulary.
  struct stat input {};
  if (options.train_vocab > 0 && ::stat(options.input.c_str(), &input) == 0 &&
      (S_ISFIFO(input.st_mode) || S_ISCHR(input.st_mode) || S_ISSOCK(input.st_mode))) {
    return common::InvalidArgument("--train-vocab reads --input twice (to learn the vocabulary, then to encode), and "
                                   "{} is a pipe or a device, read once: write it to a file first, or encode it "
                                   "with --vocab-file and --merge-file",
                                   options.input);
  }
  if (options.input_format != "auto" && options.input_format != "text" && options.input_format != "jsonl") {
    return common::InvalidArgument("--input-format {}: expected auto, text or jsonl", options.input_format);
  }
  if (!IsJsonlInput(options) && options.json_keys != PrepOptions{}.json_keys) {
    return common::InvalidArgument("--json-keys: {} is read as text (JSONL input ends in .jsonl or .json, or give "
                                   "--input-format jsonl)",
                                   options.input);
  }
  if (IsJsonlInput(options) && !options.document_separator.empty()) {
    return common::InvalidArgument("--document-separator: {} is JSONL, one document per line", options.input);
  }
  return common::Status::Ok();
}

common::StatusOr<PrepStats> RunPrep(const PrepOptions& options) {
  SRUNWAY_RETURN_IF_ERROR(CheckPrepOptions(options));
  const bool load = !options.vocab_file.empty() || !options.merge_file.empty();
  std::unique_ptr<Tokenizer> tokenizer;
  if (load) {
    SRUNWAY_ASSIGN_OR_RETURN(Tokenizer loaded, Tokenizer::Load(options.vocab_file, options.merge_file));
    tokenizer = std::make_unique<Tokenizer>(std::move(loaded));
  } else if (!options.tokenizer_model.empty()) {
    auto loaded = Tokenizer::LoadModel(options.tokenizer_model, options.tokenizer_type);
    if (!loaded.ok()) return loaded.status().WithContext("--tokenizer-model");
    tokenizer = std::make_unique<Tokenizer>(std::move(*loaded));
  } else {
    SRUNWAY_ASSIGN_OR_RETURN(Tokenizer trained, TrainTokenizer(options));
    tokenizer = std::make_unique<Tokenizer>(std::move(trained));
  }
  if (options.append_eod && tokenizer->eod() < 0) {
    if (tokenizer->sentencepiece()) {
      return common::InvalidArgument("--tokenizer-model {}: no end-of-document token (the model's eos_id is -1) to "
                                     "end each document with; --no-append-eod writes none", options.tokenizer_model);
    }
    if (tokenizer->hugging_face()) {
      return common::InvalidArgument("--tokenizer-model {}: no eos_token (tokenizer_config.json beside tokenizer.json "
                                     "names it) to end each document with; give one, or --no-append-eod",
                                     options.tokenizer_model);
    }
    return common::InvalidArgument("{}: the vocabulary has no {} token for --append-eod", options.vocab_file, kEndOfText);
  }

  SRUNWAY_ASSIGN_OR_RETURN(auto reader, DocumentReader::Open(options));
  SRUNWAY_ASSIGN_OR_RETURN(IndexedDatasetWriter writer,
                           IndexedDatasetWriter::Create(options.output_prefix, tokenizer->vocab_size()));
  PrepStats stats;
  stats.vocab_size = tokenizer->vocab_size();
  std::vector<std::string> batch;
  Progress progress(options.progress, "encoding");
  while (true) {
    SRUNWAY_RETURN_IF_ERROR(CheckStop(options));  // the writer's temporaries go with it
    SRUNWAY_ASSIGN_OR_RETURN(bool more, reader->Next(batch));
    if (!more) break;
    std::vector<std::vector<int32_t>> encoded(batch.size());
    ParallelSlices(batch.size(), options.workers, [&](size_t, size_t first, size_t last) {
      for (size_t d = first; d < last; ++d) {
        encoded[d] = tokenizer->Encode(batch[d]);
        if (options.append_eod) encoded[d].push_back(tokenizer->eod());
      }
    });
    for (size_t d = 0; d < batch.size(); ++d) {
      SRUNWAY_RETURN_IF_ERROR(writer.AddDocument(encoded[d]));
      stats.tokens += static_cast<int64_t>(encoded[d].size());
      stats.bytes += static_cast<int64_t>(batch[d].size());
    }
    stats.documents += static_cast<int64_t>(batch.size());
    progress.Update(reader->bytes_read(), reader->total_bytes());
  }
  progress.Done();
  if (stats.documents == 0) return common::InvalidArgument("{}: no documents", options.input);
  // The dataset and its tokenizer are one set: committed together, or none of them (a new .bin beside an earlier
  // run's .idx and vocabulary trained without a word of error).
  SRUNWAY_ASSIGN_OR_RETURN(std::vector<common::AtomicFile> tokenizer_files,
                           tokenizer->StageBeside(options.output_prefix));
  std::vector<std::filesystem::path> written;
  for (const common::AtomicFile& file : tokenizer_files) written.push_back(file.path());
  SRUNWAY_RETURN_IF_ERROR(writer.Finish(std::move(tokenizer_files)));
  // An earlier run's tokenizer files of another kind go: srunway-train would take PREFIX.tokenizer.json first, then
  // PREFIX.tokenizer.model.
  std::error_code error;
  for (const char* suffix :
       {".vocab.json", ".merges.txt", ".tokenizer.json", ".tokenizer.model", ".tokenizer_config.json"}) {
    const std::filesystem::path file = options.output_prefix + suffix;
    if (std::find(written.begin(), written.end(), file) == written.end()) std::filesystem::remove(file, error);
  }
  return stats;
}

common::StatusOr<int64_t> DecodeDataset(const DecodeOptions& options,
                                        const std::function<common::Status(std::string_view line)>& emit) {
  SRUNWAY_ASSIGN_OR_RETURN(std::unique_ptr<TokenSource> dataset, OpenTokenSource(options.prefix));
  const auto given =
      TokenizerSource::Given(options.tokenizer_model, options.tokenizer_type, options.vocab_file, options.merge_file);
  auto tokenizer = (given ? *given : TokenizerBeside(options.prefix)).Load();
  const bool whole = dataset->sequences_are_documents();
  if (!tokenizer.ok() && !given && tokenizer.status().code() == common::StatusCode::kNotFound) {
    if (!whole) {
      return common::NotFound("{}: llm.c shards carry no tokenizer: give --vocab-file and --merge-file (GPT-2's, "
                              "which llm.c's data scripts use) or --tokenizer-model", options.prefix);
    }
    return common::NotFound("{}: no tokenizer beside the dataset ({}.tokenizer.json, .tokenizer.model, or .vocab.json "
                            "and .merges.txt, as srunway-prep writes them): give --vocab-file and --merge-file or "
                            "--tokenizer-model ({})", options.prefix, options.prefix, tokenizer.status().message());
  }
  if (!tokenizer.ok()) return tokenizer.status();
  int64_t documents = 0;
  auto line = [&](const std::vector<int32_t>& tokens) -> common::Status {
    if (options.stop != nullptr && *options.stop != 0) {
      return common::Aborted("stopped by {} after {} {}documents", common::SignalName(*options.stop), documents,
                             whole ? fmt::format("of {} ", dataset->size()) : "");
    }
    ++documents;
    const common::Json text = {{"text", whole ? tokenizer->DecodeDocument(tokens) : tokenizer->DecodeText(tokens)}};
    return emit(text.dump(-1, ' ', false, common::Json::error_handler_t::replace) + '\n');
  };
  // llm.c's shards hold one stream of documents, each after an end of document (its fineweb.py and
  // tinyshakespeare.py put <|endoftext|> before each), the shards in order, a document that did not fit one going
  // on in the next; a Megatron dataset holds a document a sequence.
  std::vector<int32_t> document;
  bool open = false;  // a document has begun (at an end of document, or at tokens before the first)
  std::vector<int32_t> chunk;
  constexpr int64_t kChunk = int64_t{1} << 20;
  for (int64_t i = 0; i < dataset->size(); ++i) {
    for (int64_t at = 0, length = dataset->length(i); at < length; at += kChunk) {
      chunk.clear();
      const int64_t count = std::min(kChunk, length - at);
      SRUNWAY_RETURN_IF_ERROR(GuardMappedReads([&] { return dataset->Read(i, at, count, chunk); }));
      for (int64_t j = 0; j < count; ++j) {
        if (chunk[j] < 0 || chunk[j] >= tokenizer->vocab_size()) {
          return common::DataLoss("{}: token {} ({}, token {}) is outside the tokenizer's vocabulary of {}: not the "
                                  "tokenizer it was made with?", options.prefix, chunk[j],
                                  whole ? fmt::format("document {}", i)
                                        : fmt::format("shard {} of {}", i + 1, dataset->size()),
                                  at + j, tokenizer->vocab_size());
        }
      }
      if (whole) {
        document.insert(document.end(), chunk.begin(), chunk.end());
        continue;
      }
      for (int32_t token : chunk) {
        if (token == tokenizer->eod() && open) {
          SRUNWAY_RETURN_IF_ERROR(line(document));
          document.clear();
        }
        if (token != tokenizer->eod()) document.push_back(token);
        open = true;
      }
    }
    if (whole) {
      SRUNWAY_RETURN_IF_ERROR(line(document));
      document.clear();
    }
  }
  if (open) SRUNWAY_RETURN_IF_ERROR(line(document));
  return documents;
}

}  // namespace srunway::trainer
