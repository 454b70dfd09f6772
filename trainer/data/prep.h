// srunway-prep's work: documents from text or JSONL, a tokenizer (trained or loaded), a Megatron dataset.
#pragma once

#include <csignal>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace srunway::trainer {

struct PrepOptions {
  std::string input;                     // text or JSONL
  std::string input_format = "auto";     // "text", "jsonl", or "auto": JSONL when the name ends in .jsonl or .json
  std::string output_prefix;             // writes PREFIX.bin, PREFIX.idx and the tokenizer's files beside them
                                         // (Tokenizer::StageBeside)
  std::vector<std::string> json_keys = {"text"};
  std::string vocab_file, merge_file;    // GPT-2 tokenizer files, or:
  std::string tokenizer_model;           // a Hugging Face tokenizer.json or SentencePiece model (or its directory)
  std::string tokenizer_type;            // ...as Tokenizer::LoadModel reads it (Megatron's --tokenizer-type), or:
  int train_vocab = 0;                   // learn a byte-level BPE of this many tokens from the input
  int workers = 1;
  bool append_eod = true;                // the end of document (<|endoftext|>, or the eos_token) after each one
  std::string document_separator;        // text input: a line equal to this ends a document ("": a blank line)
  bool progress = true;                  // progress on stderr
  // Set (to the signal's number) by a handler to stop between batches: the output's temporary files are removed
  // and RunPrep returns Aborted. Null: never.
  const volatile std::sig_atomic_t* stop = nullptr;
};

struct PrepStats {
  int64_t documents = 0;
  int64_t tokens = 0;
  int64_t bytes = 0;
  int vocab_size = 0;
};

// Whether the input is JSONL (one document per line): as --input-format says, or under "auto" by its name, .jsonl
// or .json (a pipe, `<(zcat x.jsonl.gz)`, needs --input-format jsonl).
bool IsJsonlInput(const PrepOptions& options);
// The options alone, before any file is read (a command-line error: srunway-prep exits 2): the input and output
// given, at least one worker, one tokenizer (--vocab-file with --merge-file, --tokenizer-model, or --train-vocab),
// and no option of the other input kind (--json-keys for text, --document-separator for JSONL).
common::Status CheckPrepOptions(const PrepOptions& options);
// Checks the options (CheckPrepOptions), then tokenizes the input into the output's files.
common::StatusOr<PrepStats> RunPrep(const PrepOptions& options);

struct DecodeOptions {
  std::string prefix;                 // the dataset: PREFIX.bin and PREFIX.idx, or llm.c shards (a glob)
  std::string vocab_file, merge_file;  // the tokenizer's files, or:
  std::string tokenizer_model, tokenizer_type;
  // (none: the tokenizer srunway-prep wrote beside PREFIX, as srunway-train finds it)
  const volatile std::sig_atomic_t* stop = nullptr;  // as PrepOptions'
};

// srunway-prep --decode: every document of a dataset back to text, each as a JSONL line {"text": ...} passed to
// `emit`, which may stop the walk with an error (a write that failed). Returns how many. A Megatron dataset's
// document is a sequence, as srunway-prep and Megatron's preprocess_data.py write them (Tokenizer::DecodeDocument);
// llm.c's shards hold one stream of documents, each after an end of document (Tokenizer::DecodeText). Bytes that
// are not UTF-8 become U+FFFD; a token outside the tokenizer's vocabulary (another tokenizer's dataset) is an error.
common::StatusOr<int64_t> DecodeDataset(const DecodeOptions& options,
                                        const std::function<common::Status(std::string_view line)>& emit);

// One JSONL line's document: the string values of `keys`, concatenated. `where` ("input.jsonl:12") names the line
// in errors: not JSON, not an object, a key missing or not a string.
common::StatusOr<std::string> JsonlDocument(std::string_view line, const std::vector<std::string>& keys,
                                            std::string_view where);

}  // namespace srunway::trainer
