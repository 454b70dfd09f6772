// Megatron indexed dataset reader and writer, and llm.c shards.
#include "trainer/data/indexed_dataset.h"

#include <fcntl.h>
#include <glob.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

#include "common/fs.h"

namespace srunway::trainer {
namespace {

constexpr char kIndexMagic[] = "MMIDIDX\0\0";
constexpr size_t kIndexMagicSize = 9;
constexpr size_t kHeaderSize = kIndexMagicSize + 8 + 1 + 8 + 8;
constexpr int32_t kLlmcMagic = 20240520;
constexpr size_t kLlmcHeaderBytes = 256 * sizeof(int32_t);

template <typename T>
T Load(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof value);
  return value;
}

bool KnownDtype(uint8_t code) {
  switch (static_cast<TokenDtype>(code)) {
    case TokenDtype::kUint8: case TokenDtype::kInt8: case TokenDtype::kInt16: case TokenDtype::kInt32:
    case TokenDtype::kInt64: case TokenDtype::kUint16: return true;
  }
  return false;
}

void AppendTokens(const uint8_t* p, TokenDtype dtype, int64_t count, std::vector<int32_t>& out) {
  for (int64_t i = 0; i < count; ++i) {
    switch (dtype) {
      case TokenDtype::kUint8: out.push_back(p[i]); break;
      case TokenDtype::kInt8: out.push_back(Load<int8_t>(p + i)); break;
      case TokenDtype::kInt16: out.push_back(Load<int16_t>(p + 2 * i)); break;
      case TokenDtype::kUint16: out.push_back(Load<uint16_t>(p + 2 * i)); break;
      case TokenDtype::kInt32: out.push_back(Load<int32_t>(p + 4 * i)); break;
      case TokenDtype::kInt64: {
        const int64_t v = Load<int64_t>(p + 8 * i);
        out.push_back(v < INT32_MIN || v > INT32_MAX ? -1 : static_cast<int32_t>(v));  // -1: caught as out of vocab
        break;
      }
    }
  }
}

class IndexedDataset : public TokenSource {
 public:
  IndexedDataset(std::string prefix, std::unique_ptr<MappedFile> idx, std::unique_ptr<MappedFile> bin, IndexView view)
      : prefix_(std::move(prefix)), idx_(std::move(idx)), bin_(std::move(bin)), view_(view) {}
  int64_t size() const override { return static_cast<int64_t>(view_.sequences); }
  int64_t length(int64_t i) const override { return view_.length(i); }
  common::Status Read(int64_t i, int64_t offset, int64_t count, std::vector<int32_t>& out) const override {
    const int size = TokenDtypeSize(view_.dtype);
    AppendTokens(bin_->bytes().data() + view_.pointer(i) + offset * size, view_.dtype, count, out);
    return common::Status::Ok();
  }
  std::string name() const override { return prefix_ + ".bin"; }

 private:
  std::string prefix_;
  std::unique_ptr<MappedFile> idx_, bin_;
  IndexView view_;
};

class LlmcShards : public TokenSource {
 public:
  explicit LlmcShards(std::vector<std::unique_ptr<MappedFile>> shards) : shards_(std::move(shards)) {}
  int64_t size() const override { return static_cast<int64_t>(shards_.size()); }
  int64_t length(int64_t i) const override { return Load<int32_t>(shards_[i]->bytes().data() + 8); }
  common::Status Read(int64_t i, int64_t offset, int64_t count, std::vector<int32_t>& out) const override {
    AppendTokens(shards_[i]->bytes().data() + kLlmcHeaderBytes + 2 * offset, TokenDtype::kUint16, count, out);
    return common::Status::Ok();
  }
  std::string name() const override {
    return shards_.size() == 1 ? shards_[0]->path().string()
                               : fmt::format("{} (+{} more shards)", shards_[0]->path().string(), shards_.size() - 1);
  }
  bool sequences_are_documents() const override { return false; }

 private:
  std::vector<std::unique_ptr<MappedFile>> shards_;
};

}  // namespace

int32_t IndexView::length(uint64_t i) const { return Load<int32_t>(base + 4 * i); }
int64_t IndexView::pointer(uint64_t i) const { return Load<int64_t>(base + 4 * sequences + 8 * i); }
int64_t IndexView::document(uint64_t i) const { return Load<int64_t>(base + 12 * sequences + 8 * i); }

int TokenDtypeSize(TokenDtype dtype) {
  switch (dtype) {
    case TokenDtype::kUint8: case TokenDtype::kInt8: return 1;
    case TokenDtype::kInt16: case TokenDtype::kUint16: return 2;
    case TokenDtype::kInt32: return 4;
    case TokenDtype::kInt64: return 8;
  }
  return 0;
}

namespace {

// Every mapping open, by its first byte: which file a bus error's address lies in. Never destroyed, so that a
// mapping closed during exit still finds it.
struct Mappings {
  struct Mapped {
    size_t size;
    std::filesystem::path path;
  };
  std::mutex mutex;
  std::map<const uint8_t*, Mapped> by_start;
};
Mappings& OpenMappings() {
  static auto* mappings = new Mappings;
  return *mappings;
}

// The guard of the read this thread is in, and the address its bus error came from.
thread_local sigjmp_buf* read_guard = nullptr;
thread_local const void* fault_address = nullptr;
struct sigaction before_guard {};

void OnBusError(int, siginfo_t* info, void*) {
  if (read_guard != nullptr) {
    fault_address = info->si_addr;
    siglongjmp(*read_guard, 1);
  }
  // Not a guarded read: the action there was before, which the faulting read meets when it runs again.
  ::sigaction(SIGBUS, &before_guard, nullptr);
}

common::Status CutShort(const void* address) {
  const auto* byte = static_cast<const uint8_t*>(address);
  Mappings& mappings = OpenMappings();
  std::lock_guard lock(mappings.mutex);
  auto it = mappings.by_start.upper_bound(byte);
  if (it == mappings.by_start.begin() || byte >= std::prev(it)->first + std::prev(it)->second.size) {
    return common::DataLoss("a bus error reading memory at {} (no mapped file holds it)", address);
  }
  const auto& [begin, mapped] = *std::prev(it);
  std::error_code ec;
  const uintmax_t now = std::filesystem::file_size(mapped.path, ec);
  if (!ec && now >= mapped.size) {  // cut short and written again since, or a failed read (NFS, a disk's error)
    return common::DataLoss("{}: a read of its mapping failed (a bus error; {} bytes when opened, {} now): rewritten "
                            "in place while the run read it, or an I/O error of its file system",
                            mapped.path.string(), mapped.size, now);
  }
  return common::DataLoss("{}: cut short while the run read it ({} bytes when opened, {} now): a file a run reads "
                          "must be replaced by a new one (written beside it and renamed over it, as srunway writes "
                          "its files), not rewritten in place",
                          mapped.path.string(), mapped.size, ec ? std::string("gone") : std::to_string(now));
}

std::function<void(const std::filesystem::path&)>& MappedFileOpened() {
  static auto* opened = new std::function<void(const std::filesystem::path&)>;
  return *opened;
}

}  // namespace

common::StatusOr<std::vector<uint8_t>> CopyMappedBytes(std::span<const uint8_t> bytes) {
  std::vector<uint8_t> copy(bytes.size());
  SRUNWAY_RETURN_IF_ERROR(GuardMappedReads([&] {
    if (!bytes.empty()) std::memcpy(copy.data(), bytes.data(), bytes.size());
    return common::Status::Ok();
  }));
  return copy;
}

void SetMappedFileOpenedForTest(std::function<void(const std::filesystem::path&)> opened) {
  MappedFileOpened() = std::move(opened);
}

common::Status GuardMappedReads(const std::function<common::Status()>& read) {
  static std::once_flag installed;
  std::call_once(installed, [] {
    struct sigaction action {};
    action.sa_sigaction = OnBusError;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;  // not blocked in the handler, so siglongjmp need not restore a mask
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, &before_guard);
  });
  sigjmp_buf* const outer = read_guard;  // a guard within a guard: the outer one holds again after this one
  sigjmp_buf jump;
  if (sigsetjmp(jump, 0) != 0) {
    read_guard = outer;
    return CutShort(fault_address);
  }
  read_guard = &jump;
  common::Status status = read();
  read_guard = outer;
  return status;
}

common::StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::filesystem::path& path) {
  SRUNWAY_ASSIGN_OR_RETURN(common::Fd fd, common::OpenRegularFile(path));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return common::ErrnoStatus(errno, "stat " + path.string());
  const size_t size = static_cast<size_t>(st.st_size);
  const uint8_t* data = nullptr;
  if (size > 0) {
    void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.get(), 0);
    if (map == MAP_FAILED) return common::ErrnoStatus(errno, "mmap " + path.string());
    data = static_cast<const uint8_t*>(map);
    Mappings& mappings = OpenMappings();
    std::lock_guard lock(mappings.mutex);
    mappings.by_start[data] = {size, path};
  }
  auto mapped = std::unique_ptr<MappedFile>(new MappedFile(path, data, size));
  if (MappedFileOpened()) MappedFileOpened()(path);
  return mapped;
}

MappedFile::~MappedFile() {
  if (data_ == nullptr) return;
  {
    Mappings& mappings = OpenMappings();
    std::lock_guard lock(mappings.mutex);
    mappings.by_start.erase(data_);
  }
  ::munmap(const_cast<uint8_t*>(data_), size_);
}

common::StatusOr<IndexView> ParseIndex(std::span<const uint8_t> idx, const std::string& where) {
  if (idx.size() < kHeaderSize || std::memcmp(idx.data(), kIndexMagic, kIndexMagicSize) != 0) {
    return common::DataLoss("{}: not a Megatron index (bad magic; expected MMIDIDX)", where);
  }
  const uint64_t version = Load<uint64_t>(idx.data() + 9);
  if (version != 1) return common::DataLoss("{}: index version {} (only 1 is known)", where, version);
  const uint8_t dtype = idx[17];
  if (!KnownDtype(dtype)) return common::DataLoss("{}: unknown dtype code {}", where, dtype);
  const uint64_t sequences = Load<uint64_t>(idx.data() + 18);
  const uint64_t documents = Load<uint64_t>(idx.data() + 26);
  const uint64_t body = idx.size() - kHeaderSize;
  // Each count bounded by the file size before any multiplication can overflow.
  if (sequences > body / 12 || documents > body / 8 || sequences * 12 + documents * 8 > body) {
    return common::DataLoss("{}: truncated: {} sequences and {} documents need {} bytes after the header, the file "
                            "has {}", where, sequences, documents, sequences * 12 + documents * 8, body);
  }
  IndexView view;
  view.dtype = static_cast<TokenDtype>(dtype);
  view.sequences = sequences;
  view.documents = documents;
  view.base = idx.data() + kHeaderSize;
  if (documents == 0 || view.document(0) != 0 || view.document(documents - 1) != static_cast<int64_t>(sequences)) {
    return common::DataLoss("{}: document indices must run from 0 to the sequence count {}", where, sequences);
  }
  for (uint64_t d = 1; d < documents; ++d) {
    if (view.document(d) < view.document(d - 1)) {
      return common::DataLoss("{}: document index {} goes backwards ({} after {})", where, d, view.document(d),
                              view.document(d - 1));
    }
  }
  for (uint64_t s = 0; s < sequences; ++s) {
    if (view.length(s) < 0 || view.pointer(s) < 0) {
      return common::DataLoss("{}: sequence {} has length {} at offset {}", where, s, view.length(s),
                              view.pointer(s));
    }
  }
  return view;
}

common::StatusOr<std::unique_ptr<TokenSource>> OpenIndexedDataset(const std::string& prefix) {
  SRUNWAY_ASSIGN_OR_RETURN(auto idx, MappedFile::Open(prefix + ".idx"));
  SRUNWAY_ASSIGN_OR_RETURN(auto bin, MappedFile::Open(prefix + ".bin"));
  SRUNWAY_ASSIGN_OR_RETURN(IndexView view, ParseIndex(idx->bytes(), prefix + ".idx"));
  const int item = TokenDtypeSize(view.dtype);
  const uint64_t bin_size = bin->bytes().size();
  for (uint64_t s = 0; s < view.sequences; ++s) {
    const uint64_t end = static_cast<uint64_t>(view.pointer(s)) + static_cast<uint64_t>(view.length(s)) * item;
    if (end > bin_size) {
      return common::DataLoss("{}.bin: sequence {} ends at byte {}, past the end of the file ({} bytes)", prefix, s,
                              end, bin_size);
    }
  }
  return std::unique_ptr<TokenSource>(new IndexedDataset(prefix, std::move(idx), std::move(bin), view));
}

bool IsLlmcShard(const std::filesystem::path& path) {
  auto fd = common::OpenRegularFile(path);
  int32_t magic = 0;
  return fd.ok() && ::read(fd->get(), &magic, sizeof magic) == sizeof magic && magic == kLlmcMagic;
}

common::StatusOr<std::unique_ptr<TokenSource>> OpenLlmcShards(const std::string& pattern) {
  glob_t matches{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &matches);
  std::vector<std::string> paths(matches.gl_pathv, matches.gl_pathv + (rc == 0 ? matches.gl_pathc : 0));
  ::globfree(&matches);
  if (paths.empty()) return common::NotFound("{}: no such file", pattern);
  std::vector<std::unique_ptr<MappedFile>> shards;
  for (const std::string& path : paths) {
    SRUNWAY_ASSIGN_OR_RETURN(auto shard, MappedFile::Open(path));
    auto bytes = shard->bytes();
    if (bytes.size() < kLlmcHeaderBytes || Load<int32_t>(bytes.data()) != kLlmcMagic) {
      return common::DataLoss("{}: not an llm.c token shard (bad magic; expected {})", path, kLlmcMagic);
    }
    const int32_t version = Load<int32_t>(bytes.data() + 4);
    if (version != 1) return common::DataLoss("{}: llm.c shard version {} (only 1, uint16 tokens, is known)", path, version);
    const int64_t tokens = Load<int32_t>(bytes.data() + 8);
    if (tokens < 0 || static_cast<uint64_t>(tokens) * 2 + kLlmcHeaderBytes > bytes.size()) {
      return common::DataLoss("{}: header says {} tokens, the file holds {}", path, tokens,
                              (bytes.size() - kLlmcHeaderBytes) / 2);
    }
    shards.push_back(std::move(shard));
  }
  return std::unique_ptr<TokenSource>(new LlmcShards(std::move(shards)));
}

struct IndexedDatasetWriter::State {
  std::string prefix;
  TokenDtype dtype;
  common::AtomicFile bin;
  std::vector<int32_t> lengths;
  std::vector<int64_t> pointers;
  int64_t offset = 0;
  int64_t vocab_size;
  std::string buffer;
};

IndexedDatasetWriter::IndexedDatasetWriter(std::unique_ptr<State> state) : state_(std::move(state)) {}
IndexedDatasetWriter::IndexedDatasetWriter(IndexedDatasetWriter&&) noexcept = default;
IndexedDatasetWriter::~IndexedDatasetWriter() = default;

common::StatusOr<IndexedDatasetWriter> IndexedDatasetWriter::Create(const std::string& prefix, int64_t vocab_size) {
  SRUNWAY_ASSIGN_OR_RETURN(common::AtomicFile bin, common::AtomicFile::Create(prefix + ".bin"));
  const TokenDtype dtype = vocab_size <= 65500 ? TokenDtype::kUint16 : TokenDtype::kInt32;
  return IndexedDatasetWriter(std::unique_ptr<State>(new State{prefix, dtype, std::move(bin), {}, {}, 0, vocab_size, {}}));
}

common::Status IndexedDatasetWriter::AddDocument(std::span<const int32_t> tokens) {
  State& s = *state_;
  s.buffer.clear();
  for (int32_t token : tokens) {
    if (token < 0 || token >= s.vocab_size) {
      return common::InvalidArgument("{}.bin: token {} is outside the vocabulary [0, {})", s.prefix, token,
                                     s.vocab_size);
    }
    if (s.dtype == TokenDtype::kUint16) {
      const uint16_t v = static_cast<uint16_t>(token);
      s.buffer.append(reinterpret_cast<const char*>(&v), 2);
    } else {
      s.buffer.append(reinterpret_cast<const char*>(&token), 4);
    }
  }
  SRUNWAY_RETURN_IF_ERROR(s.bin.Write(s.buffer));
  s.lengths.push_back(static_cast<int32_t>(tokens.size()));
  s.pointers.push_back(s.offset);
  s.offset += static_cast<int64_t>(s.buffer.size());
  return common::Status::Ok();
}

common::Status IndexedDatasetWriter::Finish(std::vector<common::AtomicFile> also) {
  State& s = *state_;
  std::string idx(kIndexMagic, kIndexMagicSize);
  auto put = [&idx](const auto& value) { idx.append(reinterpret_cast<const char*>(&value), sizeof value); };
  put(uint64_t{1});
  put(static_cast<uint8_t>(s.dtype));
  put(static_cast<uint64_t>(s.lengths.size()));
  put(static_cast<uint64_t>(s.lengths.size() + 1));
  idx.append(reinterpret_cast<const char*>(s.lengths.data()), 4 * s.lengths.size());
  idx.append(reinterpret_cast<const char*>(s.pointers.data()), 8 * s.pointers.size());
  for (size_t d = 0; d <= s.lengths.size(); ++d) put(static_cast<int64_t>(d));
  SRUNWAY_ASSIGN_OR_RETURN(common::AtomicFile idx_file, common::StageFile(s.prefix + ".idx", idx));
  // .bin first: an .idx never points into a .bin that is not there yet.
  std::vector<common::AtomicFile> files;
  files.push_back(std::move(s.bin));
  files.push_back(std::move(idx_file));
  for (common::AtomicFile& file : also) files.push_back(std::move(file));
  return common::CommitTogether(files);
}

}  // namespace srunway::trainer
