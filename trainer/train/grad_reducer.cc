// Bucketed, overlapped gradient all-reduce.
#include "trainer/train/grad_reducer.h"

#include <algorithm>

namespace srunway::trainer {

GradReducer::GradReducer(launcher::Comm& comm, std::span<float> grads, size_t bucket_bytes, bool overlap)
    : comm_(comm), grads_(grads), overlap_(overlap) {
  const int64_t per_bucket = std::max<int64_t>(1, static_cast<int64_t>(bucket_bytes / sizeof(float)));
  for (int64_t end = static_cast<int64_t>(grads.size()); end > 0; end -= per_bucket) {
    const int64_t begin = std::max<int64_t>(0, end - per_bucket);
    buckets_.push_back({begin, end - begin});
  }
  final_from_ = static_cast<int64_t>(grads.size());
}

void GradReducer::Arm() {
  armed_ = true;
  final_from_ = static_cast<int64_t>(grads_.size());
  next_bucket_ = 0;
  started_early_ = 0;
  wait_ms_ = 0;
  error_ = common::Status::Ok();
}

void GradReducer::Ready(ParamRange range) {
  if (!armed_ || !error_.ok()) return;
  if (range.offset + range.count != final_from_) {
    error_ = common::Internal("gradient range [{}, {}) became final out of order (final from {})", range.offset,
                              range.offset + range.count, final_from_);
    return;
  }
  final_from_ = range.offset;
  if (!overlap_) return;
  const size_t before = next_bucket_;
  error_ = StartUpTo(final_from_);
  started_early_ += static_cast<int>(next_bucket_ - before);
  if (error_.ok()) error_ = TestInFlight();
}

common::Status GradReducer::StartUpTo(int64_t final_from) {
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].offset >= final_from) {
    float* data = grads_.data() + buckets_[next_bucket_].offset;
    SRUNWAY_ASSIGN_OR_RETURN(
        launcher::Handle handle,
        comm_.IAllReduce(data, data, static_cast<size_t>(buckets_[next_bucket_].count), launcher::DataType::kFloat32,
                         launcher::ReduceOp::kSum));
    in_flight_.push_back(std::move(handle));
    ++next_bucket_;
  }
  return common::Status::Ok();
}

common::Status GradReducer::TestInFlight() {
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    SRUNWAY_ASSIGN_OR_RETURN(bool done, (*it)->Test());
    it = done ? in_flight_.erase(it) : it + 1;
  }
  return common::Status::Ok();
}

common::Status GradReducer::Finish() {
  const auto start = std::chrono::steady_clock::now();
  armed_ = false;
  common::Status status = error_;
  if (status.ok()) status = StartUpTo(0);
  for (launcher::Handle& handle : in_flight_) {
    common::Status done = handle->Wait();
    if (status.ok()) status = done;
  }
  in_flight_.clear();
  wait_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return status;
}

}  // namespace srunway::trainer
