// TensorBoard's event files. The four messages written (Event, Summary, Summary.Value, SessionLog) are encoded here
// field by field in protobuf's wire format, with the field numbers of TensorFlow's event.proto and summary.proto:
// linking libprotobuf into the static trainer for a handful of fields would weigh more than the encoder.
#include "trainer/train/tensorboard.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <climits>
#include <filesystem>
#include <system_error>

#include "common/env.h"
#include "common/parse.h"

namespace srunway::trainer {
namespace {

constexpr std::array<uint32_t, 256> kCrc32cTable = [] {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1) ? 0x82F63B78u : 0);  // reflected Castagnoli
    table[i] = crc;
  }
  return table;
}();

// Protobuf's wire format: a key (field number and wire type), then a varint, 8 or 4 little-endian bytes, or a
// length and the bytes.
enum WireType { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

void PutVarint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void PutKey(std::string& out, int field, WireType type) {
  PutVarint(out, static_cast<uint64_t>(field) << 3 | type);
}

template <typename T>
void PutLittleEndian(std::string& out, T value) {
  for (size_t i = 0; i < sizeof value; ++i) out.push_back(static_cast<char>(value >> (CHAR_BIT * i) & 0xFF));
}

void PutBytes(std::string& out, int field, std::string_view bytes) {
  PutKey(out, field, kBytes);
  PutVarint(out, bytes.size());
  out.append(bytes);
}

// tensorflow.Event: wall_time = 1 (double), step = 2 (int64), then one of file_version = 3, summary = 5,
// session_log = 6.
std::string EventHeader(double wall_time_s, int64_t step) {
  std::string event;
  PutKey(event, 1, kFixed64);
  PutLittleEndian(event, std::bit_cast<uint64_t>(wall_time_s));
  if (step != 0) {
    PutKey(event, 2, kVarint);
    PutVarint(event, static_cast<uint64_t>(step));
  }
  return event;
}

std::string Frame(std::string_view data) {
  std::string length;
  PutLittleEndian(length, static_cast<uint64_t>(data.size()));
  std::string record = length;
  PutLittleEndian(record, MaskedCrc32c(length));
  record.append(data);
  PutLittleEndian(record, MaskedCrc32c(data));
  return record;
}

constexpr std::string_view kPrefix = "events.out.tfevents.";

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

uint32_t Crc32c(std::string_view bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char byte : bytes) crc = kCrc32cTable[(crc ^ byte) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

uint32_t MaskedCrc32c(std::string_view bytes) {
  const uint32_t crc = Crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

std::string FileVersionRecord(double wall_time_s) {
  std::string event = EventHeader(wall_time_s, 0);
  PutBytes(event, 3, "brain.Event:2");
  return Frame(event);
}

std::string ScalarsRecord(double wall_time_s, int64_t step, const std::vector<Scalar>& scalars) {
  std::string summary;  // tensorflow.Summary: repeated Value value = 1
  for (const Scalar& scalar : scalars) {
    std::string value;  // Summary.Value: tag = 1, simple_value = 2 (float)
    PutBytes(value, 1, scalar.tag);
    PutKey(value, 2, kFixed32);
    PutLittleEndian(value, std::bit_cast<uint32_t>(scalar.value));
    PutBytes(summary, 1, value);
  }
  std::string event = EventHeader(wall_time_s, step);
  PutBytes(event, 5, summary);
  return Frame(event);
}

std::string SessionStartRecord(double wall_time_s, int64_t step) {
  std::string session_log;  // tensorflow.SessionLog: status = 1 (START = 1)
  PutKey(session_log, 1, kVarint);
  PutVarint(session_log, 1);
  std::string event = EventHeader(wall_time_s, step);
  PutBytes(event, 6, session_log);
  return Frame(event);
}

common::Status EventFile::Open(const std::string& dir, std::optional<int64_t> resumed_at) {
  if (dir.empty()) return common::Status::Ok();
  SRUNWAY_RETURN_IF_ERROR(common::PrepareWritableDir(dir, "--tensorboard-dir"));
  const std::string host_name = common::HostName().value_or("localhost");
  const double now = Now();
  // After every file there: a run resumed within the second its predecessor started in (a requeue that failed at
  // once) would otherwise sort by its process id, perhaps before it, and TensorBoard would read the two backwards.
  int64_t seconds = static_cast<int64_t>(now);
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(kPrefix)) continue;
    auto earlier = common::ParseInt(std::string_view(name).substr(kPrefix.size(), 10), "event file time");
    if (earlier.ok()) seconds = std::max(seconds, *earlier + 1);
  }
  path_ = fmt::format("{}/{}{:010d}.{}.{}", dir, kPrefix, seconds, host_name, ::getpid());
  SRUNWAY_ASSIGN_OR_RETURN(fd_, common::OpenToWrite(path_, O_CREAT | O_EXCL | O_APPEND));
  SRUNWAY_RETURN_IF_ERROR(Append(FileVersionRecord(now)));
  // TensorBoard purges from the restart's step: the resumed run's first step is the one after the checkpoint's.
  if (resumed_at) SRUNWAY_RETURN_IF_ERROR(Append(SessionStartRecord(now, *resumed_at + 1)));
  return common::Status::Ok();
}

common::Status EventFile::Write(int64_t step, const std::vector<Scalar>& scalars) {
  if (fd_.get() < 0 || scalars.empty()) return common::Status::Ok();
  return Append(ScalarsRecord(Now(), step, scalars));
}

common::Status EventFile::Append(const std::string& record) {
  return common::AppendWhole(fd_.get(), record, "--tensorboard-dir event file " + path_);
}

}  // namespace srunway::trainer
