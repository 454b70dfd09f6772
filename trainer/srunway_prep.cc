// srunway-prep: text or JSONL -> Megatron indexed dataset (PREFIX.bin + PREFIX.idx) and its tokenizer files.
// srunway-prep --decode PREFIX: the dataset back to JSONL on stdout.
// Exit codes: 0 done, 1 bad input or a failed write (nothing half-written is left), 2 bad command line, 128 + the
// signal when stopped by SIGINT, SIGTERM or SIGHUP (its temporary files removed).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string_view>
#include <thread>

#include "common/cli.h"
#include "common/log.h"
#include "common/signals.h"
#include "trainer/data/prep.h"
#include "trainer/data/tokenizer.h"

int main(int argc, char** argv) {
  using srunway::trainer::PrepOptions;
  srunway::common::InitLogging("srunway-prep");
  srunway::common::ExitIfStdoutLost(1);
  PrepOptions options;
  options.workers = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  bool no_eod = false, quiet = false;
  CLI::App app{"Tokenize text or JSONL into a Megatron indexed dataset (PREFIX.bin, PREFIX.idx) with a BPE tokenizer "
               "saved beside it (PREFIX.vocab.json and PREFIX.merges.txt, a Hugging Face tokenizer's "
               "PREFIX.tokenizer.json, or a SentencePiece model's PREFIX.tokenizer.model)."};
  srunway::common::SetUpProgram(app, "srunway-prep");
  // --decode reads a dataset instead of writing one: --input and --output-prefix are required only without it.
  const bool decoding = std::any_of(argv + 1, argv + argc, [](std::string_view arg) {
    return arg == "--decode" || arg.starts_with("--decode=");
  });
  srunway::trainer::DecodeOptions decode;
  CLI::Option* decode_option =
      app.add_option("--decode", decode.prefix,
                     "instead: print the dataset PREFIX (PREFIX.bin, PREFIX.idx, or llm.c shards: a glob) back as "
                     "JSONL, a {\"text\": ...} line per document, decoded with the tokenizer beside it (or the one "
                     "given)");
  std::vector<CLI::Option*> encoding;
  encoding.push_back(app.add_option("--input", options.input, "text file (documents separated by blank lines or "
                                    "--document-separator) or JSONL file (.jsonl/.json, one object per line)")
                         ->required(!decoding));
  encoding.push_back(app.add_option("--input-format", options.input_format,
                                    "text, jsonl, or auto: JSONL when --input ends in .jsonl or .json (a pipe needs "
                                    "jsonl)")
                         ->capture_default_str()->check(CLI::IsMember({"auto", "text", "jsonl"})));
  encoding.push_back(app.add_option("--output-prefix", options.output_prefix, "writes PREFIX.bin and PREFIX.idx")
                         ->required(!decoding));
  encoding.push_back(app.add_option("--json-keys", options.json_keys, "JSONL keys whose values form the document")
                         ->capture_default_str());
  app.add_option("--vocab-file", options.vocab_file, "GPT-2 vocab.json to encode with");
  app.add_option("--merge-file", options.merge_file, "GPT-2 merges.txt to encode with");
  app.add_option("--tokenizer-model", options.tokenizer_model,
                 "a Hugging Face tokenizer.json of BPE (byte-level: GPT-2's, Llama 3's, Qwen2's, Qwen3's; "
                 "SentencePiece-style: Llama 2's, Mistral's) with --tokenizer-type HuggingFaceTokenizer, or a "
                 "SentencePiece BPE model (Llama 2's tokenizer.model) with Llama2Tokenizer or "
                 "GPTSentencePieceTokenizer (Megatron's pairs); or the model directory holding it");
  encoding.push_back(app.add_option("--train-vocab", options.train_vocab,
                                    "train a byte-level BPE of N tokens on the input instead")
                         ->check(CLI::Range(257, 1 << 24)));
  app.add_option("--workers", options.workers, "threads")->capture_default_str()->check(CLI::Range(1, 1024));
  encoding.push_back(app.add_option("--document-separator", options.document_separator,
                                    "text input: a line equal to this ends a document (default: a blank line)"));
  CLI::Option* eod = app.add_flag("--append-eod", options.append_eod,
                                  "end every document with <|endoftext|> (a Hugging Face tokenizer's eos_token) "
                                  "(default)");
  encoding.push_back(eod);
  encoding.push_back(app.add_flag("--no-append-eod", no_eod, "do not")->excludes(eod));
  for (CLI::Option* option : encoding) decode_option->excludes(option);
  app.add_flag("--quiet", quiet, "no progress");
  // Megatron's tools/preprocess_data.py flags, as its scripts pass them: what srunway-prep does is taken, the rest
  // refused by name, so that a pasted command does not make another dataset than it says.
  std::string tokenizer_type, dataset_impl, lang;
  int partitions = 1, log_interval = 1000;
  bool keep_sequential = false, split_sentences = false, keep_newlines = false;
  app.add_option("--tokenizer-type", tokenizer_type,
                 "Megatron's: GPT2BPETokenizer (GPT-2's byte-level BPE: --vocab-file and --merge-file, or the one "
                 "--train-vocab learns), or with --tokenizer-model HuggingFaceTokenizer, Llama2Tokenizer (<s> before "
                 "each document) or GPTSentencePieceTokenizer");
  app.add_option("--dataset-impl", dataset_impl, "Megatron's (older): mmap only, the indexed dataset written here")
      ->check(CLI::IsMember({"mmap"}));
  app.add_option("--partitions", partitions,
                 "Megatron's: taken (the input is shared out over --workers threads; one dataset either way)")
      ->check(CLI::PositiveNumber);
  app.add_option("--log-interval", log_interval, "Megatron's: taken (progress shows as srunway-prep shows it)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--keep-sequential-samples", keep_sequential,
               "Megatron's: taken (documents always keep the input's order)");
  app.add_flag("--split-sentences", split_sentences,
               "Megatron's: refused (each document is one sequence here; no sentence splitting)");
  app.add_flag("--keep-newlines", keep_newlines, "Megatron's: taken (it acts only with --split-sentences)");
  app.add_option("--lang", lang, "Megatron's: taken (it acts only with --split-sentences)");
  srunway::common::RefuseIntegersOutOfRange(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  const bool model_type =
      tokenizer_type == "HuggingFaceTokenizer" || srunway::trainer::Tokenizer::SentencePieceType(tokenizer_type);
  if (!tokenizer_type.empty() && tokenizer_type != "GPT2BPETokenizer" && !model_type) {
    srunway::common::LogError("--tokenizer-type {}: srunway-prep reads BPE only: GPT2BPETokenizer (--vocab-file and "
                              "--merge-file, or --train-vocab), HuggingFaceTokenizer (--tokenizer-model: a "
                              "tokenizer.json), Llama2Tokenizer or GPTSentencePieceTokenizer (--tokenizer-model: a "
                              "SentencePiece BPE model)", tokenizer_type);
    return 2;
  }
  if (!tokenizer_type.empty() && model_type == options.tokenizer_model.empty()) {
    srunway::common::LogError("--tokenizer-type {} {}", tokenizer_type, options.tokenizer_model.empty()
                                  ? "needs --tokenizer-model (the tokenizer's file or the model directory holding it)"
                                  : "reads --vocab-file and --merge-file; --tokenizer-model goes with "
                                    "HuggingFaceTokenizer, Llama2Tokenizer or GPTSentencePieceTokenizer");
    return 2;
  }
  if (model_type) options.tokenizer_type = tokenizer_type;
  if (decoding) {
    decode.vocab_file = options.vocab_file;
    decode.merge_file = options.merge_file;
    decode.tokenizer_model = options.tokenizer_model;
    decode.tokenizer_type = options.tokenizer_type;
    if (decode.vocab_file.empty() != decode.merge_file.empty() ||
        (!decode.vocab_file.empty() && !decode.tokenizer_model.empty())) {
      srunway::common::LogError("--decode: give one tokenizer, --vocab-file and --merge-file or --tokenizer-model, "
                                "or none for the one beside the dataset");
      return 2;
    }
    decode.stop = srunway::common::StopOnSignals();
    srunway::common::ExitIfStdoutLost(0);  // a failed write is this one line, below
    auto decoded = srunway::trainer::DecodeDataset(decode, [](std::string_view line) {
      srunway::common::PrintText(line);
      return std::ferror(stdout) ? srunway::common::FlushStdout() : srunway::common::Status::Ok();
    });
    const srunway::common::Status done = decoded.ok() ? srunway::common::FlushStdout() : decoded.status();
    if (!done.ok()) {
      const bool incomplete = std::ferror(stdout);
      // A signal that came while a write waited (on a slow reader) fails that write with EINTR: it stopped the run.
      const bool interrupted =
          incomplete && *decode.stop != 0 && done.code() == srunway::common::StatusCode::kAborted;
      srunway::common::LogError("{}{}", interrupted ? fmt::format("stopped by {} while writing to stdout",
                                                                  srunway::common::SignalName(*decode.stop))
                                                    : done.message(),
                                incomplete ? "; the output is incomplete" : "");
      return *decode.stop != 0 ? 128 + *decode.stop : 1;
    }
    return 0;
  }
  if (split_sentences) {
    srunway::common::LogError("--split-sentences: srunway-prep does not split documents into sentences (Megatron "
                              "does it for BERT's sentence-order data); leave it out for GPT pretraining");
    return 2;
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
