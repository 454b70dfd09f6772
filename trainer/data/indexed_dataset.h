// Megatron indexed datasets (.bin tokens + .idx index), read through mmap and written by srunway-prep.
// .idx: magic "MMIDIDX\0\0", u64 version (1), u8 dtype code, u64 sequence count S, u64 document count D,
// int32 lengths[S], int64 byte offsets into .bin[S], int64 document indices[D] (0, ..., S: where each document's
// sequences start, and the end).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/fs.h"
#include "common/status.h"

namespace srunway::trainer {

// Megatron's DType codes.
enum class TokenDtype : uint8_t { kUint8 = 1, kInt8 = 2, kInt16 = 3, kInt32 = 4, kInt64 = 5, kUint16 = 8 };
int TokenDtypeSize(TokenDtype dtype);

// A read-only memory mapping, unmapped on destruction.
class MappedFile {
 public:
  static common::StatusOr<std::unique_ptr<MappedFile>> Open(const std::filesystem::path& path);
  ~MappedFile();
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::filesystem::path& path() const { return path_; }

 private:
  MappedFile(std::filesystem::path path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::filesystem::path path_;
  const uint8_t* data_;
  size_t size_;
};

// Runs `read`, which reads mapped files. A mapped file cut short while it is mapped (rewritten in place while a run
// reads it: `cp` over it, or a preprocessing script writing to the same prefix) makes the kernel end the process
// with SIGBUS at the first read past its new end, without a word; under this guard that read ends `read` instead,
// and the result is DataLoss naming the file. It leaves `read` by siglongjmp, so what `read` calls must hold no
// object with a destructor while it reads mapped memory (the readers here hold none).
common::Status GuardMappedReads(const std::function<common::Status()>& read);

// `bytes` (of a mapped file) copied under GuardMappedReads, for a reader that builds strings and vectors as it goes
// (a checkpoint's or a safetensors file's header), which may not run under the guard itself.
common::StatusOr<std::vector<uint8_t>> CopyMappedBytes(std::span<const uint8_t> bytes);

// For tests: runs after each file MappedFile::Open maps (a test cuts the file short there, as a file rewritten in
// place while a run reads it is); empty: none. Not for programs.
void SetMappedFileOpenedForTest(std::function<void(const std::filesystem::path&)> opened);

// Documents of tokens, however stored: what the sample index packs into training sequences.
class TokenSource {
 public:
  virtual ~TokenSource() = default;
  virtual int64_t size() const = 0;  // sequences ("documents" to the sampler)
  virtual int64_t length(int64_t i) const = 0;
  // Appends tokens [offset, offset + count) of sequence i to `out`.
  virtual common::Status Read(int64_t i, int64_t offset, int64_t count, std::vector<int32_t>& out) const = 0;
  virtual std::string name() const = 0;  // for error messages: the file(s)
  // Whether each sequence is one document (a Megatron dataset's); llm.c's shards are one stream of documents, each
  // after an end of document.
  virtual bool sequences_are_documents() const { return true; }
};

// Opens PREFIX.idx and PREFIX.bin and checks that every offset and length lies inside .bin.
common::StatusOr<std::unique_ptr<TokenSource>> OpenIndexedDataset(const std::string& prefix);

// Checks an .idx image alone (the fuzzer's entry point): header, counts, sizes, document indices.
// The arrays start at byte 34, so they are never aligned: read through these accessors, never cast.
struct IndexView {
  TokenDtype dtype = TokenDtype::kUint16;
  uint64_t sequences = 0;
  uint64_t documents = 0;
  const uint8_t* base = nullptr;  // first byte after the header

  int32_t length(uint64_t i) const;
  int64_t pointer(uint64_t i) const;
  int64_t document(uint64_t i) const;
};
common::StatusOr<IndexView> ParseIndex(std::span<const uint8_t> idx, const std::string& where);

// llm.c token shards: 256 int32 header (magic 20240520, version 1, token count), then uint16 tokens. A glob
// pattern opens several shards; each shard is one sequence.
common::StatusOr<std::unique_ptr<TokenSource>> OpenLlmcShards(const std::string& pattern);
bool IsLlmcShard(const std::filesystem::path& path);

// Writes PREFIX.bin and PREFIX.idx (one sequence per document), each atomically. The dtype is uint16 when every
// token fits, else int32 (Megatron's choice by vocabulary size).
class IndexedDatasetWriter {
 public:
  static common::StatusOr<IndexedDatasetWriter> Create(const std::string& prefix, int64_t vocab_size);
  IndexedDatasetWriter(IndexedDatasetWriter&&) noexcept;
  ~IndexedDatasetWriter();
  common::Status AddDocument(std::span<const int32_t> tokens);
  // Writes the index and commits PREFIX.bin, PREFIX.idx and `also` (the tokenizer's files) together
  // (common::CommitTogether): a failure leaves none of them new beside old ones.
  common::Status Finish(std::vector<common::AtomicFile> also = {});

 private:
  struct State;
  explicit IndexedDatasetWriter(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace srunway::trainer
