// srunway-prep: text or JSONL -> Megatron indexed dataset (PREFIX.bin + PREFIX.idx) and its tokenizer files.
// Exit codes: 0 done, 1 bad input or a failed write (nothing half-written is left), 2 bad command line, 128 + the
// signal when stopped by SIGINT, SIGTERM or SIGHUP (its temporary files removed).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <thread>

#include "common/cli.h"
#include "common/log.h"
#include "common/signals.h"
#include "trainer/data/prep.h"

int main(int argc, char** argv) {
  using srunway::trainer::PrepOptions;
  srunway::common::InitLogging("srunway-prep");
  srunway::common::ExitIfStdoutLost(1);
  PrepOptions options;
  options.workers = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  bool no_eod = false, quiet = false;
  CLI::App app{"Tokenize text or JSONL into a Megatron indexed dataset (PREFIX.bin, PREFIX.idx) with a byte-level "
               "BPE tokenizer saved beside it (PREFIX.vocab.json, PREFIX.merges.txt)."};
  srunway::common::SetUpProgram(app, "srunway-prep");
  app.add_option("--input", options.input, "text file (documents separated by blank lines or --document-separator) "
                 "or JSONL file (.jsonl/.json, one object per line)")->required();
  app.add_option("--input-format", options.input_format,
                 "text, jsonl, or auto: JSONL when --input ends in .jsonl or .json (a pipe needs jsonl)")
      ->capture_default_str()->check(CLI::IsMember({"auto", "text", "jsonl"}));
  app.add_option("--output-prefix", options.output_prefix, "writes PREFIX.bin and PREFIX.idx")->required();
  app.add_option("--json-keys", options.json_keys, "JSONL keys whose values form the document")->capture_default_str();
  app.add_option("--vocab-file", options.vocab_file, "GPT-2 vocab.json to encode with");
  app.add_option("--merge-file", options.merge_file, "GPT-2 merges.txt to encode with");
  app.add_option("--train-vocab", options.train_vocab, "train a byte-level BPE of N tokens on the input instead")
      ->check(CLI::Range(257, 1 << 24));
  app.add_option("--workers", options.workers, "threads")->capture_default_str()->check(CLI::Range(1, 1024));
  app.add_option("--document-separator", options.document_separator,
                 "text input: a line equal to this ends a document (default: a blank line)");
  CLI::Option* eod =
      app.add_flag("--append-eod", options.append_eod, "end every document with <|endoftext|> (default)");
  app.add_flag("--no-append-eod", no_eod, "do not")->excludes(eod);
  app.add_flag("--quiet", quiet, "no progress");
  srunway::common::RefuseIntegersOutOfRange(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  // Options that cannot go together are a command-line error (exit 2), not bad input.
  if (auto checked = srunway::trainer::CheckPrepOptions(options); !checked.ok()) {
    srunway::common::LogError("{}", checked.message());
    return 2;
  }
  if (no_eod) options.append_eod = false;
  options.progress = !quiet;
  // Ctrl-C stops between batches, so that the output's temporaries (as large as the dataset) are removed.
  options.stop = srunway::common::StopOnSignals();
  const auto start = std::chrono::steady_clock::now();
  auto stats = srunway::trainer::RunPrep(options);
  if (!stats.ok()) {
    srunway::common::LogError("{}", stats.status().message());
    return *options.stop != 0 ? 128 + *options.stop : 1;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  srunway::common::Print(
      "srunway-prep: {} document{}, {} tokens ({:.2f} bytes/token, vocabulary {}) in {:.1f} s -> {}.bin, {}.idx\n",
      stats->documents, stats->documents == 1 ? "" : "s", stats->tokens,
      static_cast<double>(stats->bytes) / std::max<int64_t>(stats->tokens, 1), stats->vocab_size, seconds,
      options.output_prefix, options.output_prefix);
  return 0;
}
