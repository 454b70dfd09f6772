// Bucketed, overlapped gradient all-reduce or reduce-scatter.
#include "trainer/train/grad_reducer.h"

#include <algorithm>

namespace srunway::trainer {
namespace {

launcher::DataType CommType(DType type) {
  switch (type) {
    case DType::kBFloat16: return launcher::DataType::kBFloat16;
    case DType::kFloat16: return launcher::DataType::kFloat16;
    case DType::kInt32: return launcher::DataType::kInt32;
    case DType::kFloat32: break;
  }
  return launcher::DataType::kFloat32;
}

}  // namespace

ParamRange Bucket::Slice(int rank) const {
  const int64_t begin = std::min(count, rank * shard);
  const int64_t end = std::min(count, (rank + 1) * shard);
  return {offset + begin, end - begin};
}

std::vector<Bucket> MakeBuckets(int64_t numel, size_t bucket_bytes, int ranks) {
  // A whole number of slices per bucket (but the last, at the start of the buffer), so that ZeRO-1 reduces and
  // gathers them in place.
  const int64_t per_bucket =
      std::max<int64_t>(ranks, static_cast<int64_t>(bucket_bytes / sizeof(float)) / ranks * ranks);
  std::vector<Bucket> buckets;
  for (int64_t end = numel; end > 0; end -= per_bucket) {
    const int64_t begin = std::max<int64_t>(0, end - per_bucket);
    buckets.push_back({begin, end - begin, (end - begin + ranks - 1) / ranks});
  }
  return buckets;
}

std::vector<ParamRange> OwnedRanges(const std::vector<Bucket>& buckets, int rank) {
  std::vector<ParamRange> owned;
  for (const Bucket& bucket : buckets) {
    if (ParamRange slice = bucket.Slice(rank); slice.count > 0) owned.push_back(slice);
  }
  return owned;
}

GradReducer::GradReducer(launcher::Comm& comm, Device& device, std::span<float> grads, std::vector<Bucket> buckets,
                         Mode mode, bool overlap, DType weights_type, Ops* bf16_casts)
    : comm_(comm), device_(device), comm_stream_(device.Adopt(comm.native_stream())), grads_(grads),
      buckets_(std::move(buckets)), mode_(mode), overlap_(overlap), weights_type_(weights_type),
      bf16_casts_(bf16_casts), rank_(comm.rank()), ranks_(comm.size()) {
  auto event = device.NewEvent();
  if (!event.ok()) throw DeviceFull(event.status());
  computed_ = std::move(*event);
  const DType reduced = bf16_casts_ != nullptr ? DType::kBFloat16 : DType::kFloat32;
  for (const Bucket& bucket : buckets_) {
    if (mode_ == Mode::kAllReduce) {
      staging_.push_back(bf16_casts_ != nullptr ? ZeroedOrThrow(device, reduced, static_cast<size_t>(bucket.count))
                                                : Buffer());
      continue;
    }
    const bool whole = bucket.count == bucket.shard * ranks_;
    const bool reduce_in_place = whole && comm_.kind() != launcher::CommKind::kMpi && bf16_casts_ == nullptr;
    staging_.push_back(reduce_in_place ? Buffer()
                                       : ZeroedOrThrow(device, reduced, static_cast<size_t>(bucket.shard * ranks_)));
    reduced_.push_back(reduce_in_place ? Buffer() : ZeroedOrThrow(device, reduced, static_cast<size_t>(bucket.shard)));
    gathered_.push_back(whole ? Buffer()
                              : ZeroedOrThrow(device, weights_type, static_cast<size_t>(bucket.shard * ranks_)));
  }
  final_from_ = static_cast<int64_t>(grads.size());
}

launcher::DataType GradReducer::ReducedType() const {
  return bf16_casts_ != nullptr ? launcher::DataType::kBFloat16 : launcher::DataType::kFloat32;
}

common::Status GradReducer::AfterCompute() {
  SRUNWAY_RETURN_IF_ERROR(device_.Record(*computed_, device_.main_stream()));
  return device_.Wait(*comm_stream_, *computed_);
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
    const Bucket& bucket = buckets_[next_bucket_];
    float* data = grads_.data() + bucket.offset;
    launcher::Handle handle;
    if (mode_ == Mode::kAllReduce) {
      void* reduce = data;
      if (bf16_casts_ != nullptr) {
        reduce = staging_[next_bucket_].data();
        bf16_casts_->GradsToBf16(reduce, data, bucket.count);
      }
      SRUNWAY_RETURN_IF_ERROR(AfterCompute());
      SRUNWAY_ASSIGN_OR_RETURN(handle, comm_.IAllReduce(reduce, reduce, static_cast<size_t>(bucket.count),
                                                        ReducedType(), launcher::ReduceOp::kSum));
    } else if (ReducesInPlace(next_bucket_)) {
      // In place: the bucket is ranks x shard floats, and this rank's slice is where the reduction goes.
      SRUNWAY_RETURN_IF_ERROR(AfterCompute());
      SRUNWAY_ASSIGN_OR_RETURN(
          handle, comm_.IReduceScatter(data, data + rank_ * bucket.shard, static_cast<size_t>(bucket.shard),
                                       launcher::DataType::kFloat32, launcher::ReduceOp::kSum));
    } else {
      // Equal blocks for the collective: the bucket, then zeros up to ranks x shard.
      Buffer& staging = staging_[next_bucket_];
      Stream& main = device_.main_stream();
      const size_t bytes = static_cast<size_t>(bucket.count) * DTypeSize(staging.dtype());
      if (bf16_casts_ != nullptr) {
        bf16_casts_->GradsToBf16(staging.data(), data, bucket.count);
      } else {
        SRUNWAY_RETURN_IF_ERROR(device_.Copy(staging.data(), data, bytes, main));
      }
      SRUNWAY_RETURN_IF_ERROR(
          device_.Zero(static_cast<std::byte*>(staging.data()) + bytes, staging.bytes() - bytes, main));
      SRUNWAY_RETURN_IF_ERROR(AfterCompute());
      SRUNWAY_ASSIGN_OR_RETURN(handle, comm_.IReduceScatter(staging.data(), reduced_[next_bucket_].data(),
                                                            static_cast<size_t>(bucket.shard), ReducedType(),
                                                            launcher::ReduceOp::kSum));
    }
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
  // Where the reduced gradients are not in place: the slice of each bucket (ZeRO-1), or each bucket (in bf16).
  for (size_t b = 0; b < buckets_.size() && status.ok(); ++b) {
    if (mode_ == Mode::kAllReduce) {
      if (bf16_casts_ != nullptr) {
        bf16_casts_->GradsFromBf16(grads_.data() + buckets_[b].offset, staging_[b].data(), buckets_[b].count);
      }
      continue;
    }
    if (ReducesInPlace(b)) continue;
    const ParamRange slice = buckets_[b].Slice(rank_);
    if (bf16_casts_ != nullptr) {
      bf16_casts_->GradsFromBf16(grads_.data() + slice.offset, reduced_[b].data(), slice.count);
    } else {
      status = device_.Copy(grads_.data() + slice.offset, reduced_[b].data(),
                            static_cast<size_t>(slice.count) * sizeof(float), device_.main_stream());
    }
  }
  wait_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return status;
}

common::Status GradReducer::StartGather(void* weights) {
  gather_into_ = weights;
  gathers_.resize(buckets_.size());
  const auto element = static_cast<int64_t>(DTypeSize(weights_type_));
  auto at = [&](void* base, int64_t index) { return static_cast<std::byte*>(base) + index * element; };
  for (size_t b = buckets_.size(); b-- > 0;) {  // from the start of the buffer
    const Bucket& bucket = buckets_[b];
    const ParamRange slice = bucket.Slice(rank_);
    // In place, this rank's slice already sits in its block of the bucket.
    void* into = GathersInPlace(b) ? at(weights, bucket.offset) : gathered_[b].data();
    void* mine = at(into, rank_ * bucket.shard);
    if (!GathersInPlace(b)) {
      SRUNWAY_RETURN_IF_ERROR(device_.Copy(mine, at(weights, slice.offset), static_cast<size_t>(slice.count * element),
                                           device_.main_stream()));
    }
    SRUNWAY_RETURN_IF_ERROR(AfterCompute());
    SRUNWAY_ASSIGN_OR_RETURN(gathers_[b],
                             comm_.IAllGather(mine, into, static_cast<size_t>(bucket.shard), CommType(weights_type_)));
  }
  return common::Status::Ok();
}

common::Status GradReducer::Need(ParamRange range) {
  common::Status status = common::Status::Ok();
  const auto element = static_cast<int64_t>(DTypeSize(weights_type_));
  for (size_t b = gathers_.size(); b-- > 0;) {
    if (gathers_[b] == nullptr || buckets_[b].offset >= range.offset + range.count) continue;
    common::Status done = gathers_[b]->Wait();
    gathers_[b].reset();
    if (done.ok() && !GathersInPlace(b)) {
      done = device_.Copy(static_cast<std::byte*>(gather_into_) + buckets_[b].offset * element, gathered_[b].data(),
                          static_cast<size_t>(buckets_[b].count * element), device_.main_stream());
    }
    if (status.ok()) status = done;
  }
  return status;
}

common::Status GradReducer::GatherMasters(std::span<const float> packed, std::span<float> whole) {
  int64_t largest = 0;
  for (const Bucket& bucket : buckets_) largest = std::max(largest, bucket.shard * ranks_);
  SRUNWAY_ASSIGN_OR_RETURN(Buffer block, Buffer::Allocate(device_, DType::kFloat32, static_cast<size_t>(largest)));
  Stream& main = device_.main_stream();
  int64_t at = 0;  // into `packed`
  for (const Bucket& bucket : buckets_) {
    const ParamRange slice = bucket.Slice(rank_);
    float* mine = block.as<float>() + rank_ * bucket.shard;
    SRUNWAY_RETURN_IF_ERROR(
        device_.Copy(mine, packed.data() + at, static_cast<size_t>(slice.count) * sizeof(float), main));
    at += slice.count;
    SRUNWAY_RETURN_IF_ERROR(AfterCompute());
    SRUNWAY_ASSIGN_OR_RETURN(launcher::Handle gather, comm_.IAllGather(mine, block.data(),
                                                                       static_cast<size_t>(bucket.shard),
                                                                       launcher::DataType::kFloat32));
    SRUNWAY_RETURN_IF_ERROR(gather->Wait());
    if (whole.empty()) continue;
    SRUNWAY_RETURN_IF_ERROR(device_.CopyToHost(whole.data() + bucket.offset, block.data(),
                                               static_cast<size_t>(bucket.count) * sizeof(float), main));
    // The next bucket's copy into the block waits for this download (one stream); the host reads after the wait.
    SRUNWAY_RETURN_IF_ERROR(device_.Synchronize(main));
  }
  return common::Status::Ok();
}

}  // namespace srunway::trainer
