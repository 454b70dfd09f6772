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
      buckets_(std::move(buckets)), mode_(mode), overlap_(overlap), weights_type_(weights_type), rank_(comm.rank()),
      ranks_(comm.size()), bf16_casts_(bf16_casts) {
  auto event = device.NewEvent();
  if (!event.ok()) throw DeviceFull(event.status());
  computed_ = std::move(*event);
  if (mode_ == Mode::kReduceScatter) {
    for (const Bucket& bucket : buckets_) {
      const bool whole = bucket.count == bucket.shard * ranks_;
      // No fp32 copies where the bucket is reduced in place, or in bf16 (through the slots below).
      const bool staged = !(whole && comm_.kind() != launcher::CommKind::kMpi) && bf16_casts_ == nullptr;
      staging_.push_back(staged ? ZeroedOrThrow(device, DType::kFloat32, static_cast<size_t>(bucket.shard * ranks_))
                                : Buffer());
      reduced_.push_back(staged ? ZeroedOrThrow(device, DType::kFloat32, static_cast<size_t>(bucket.shard))
                                : Buffer());
      gathered_.push_back(whole ? Buffer()
                                : ZeroedOrThrow(device, weights_type, static_cast<size_t>(bucket.shard * ranks_)));
    }
  }
  if (bf16_casts_ != nullptr) {
    int64_t largest = 0, slice = 0;
    for (const Bucket& bucket : buckets_) {
      largest = std::max(largest, mode_ == Mode::kAllReduce ? bucket.count : bucket.shard * ranks_);
      slice = std::max(slice, bucket.shard);
    }
    for (size_t s = 0; s < std::min(kBf16Slots, buckets_.size()); ++s) {
      bf16_buckets_.push_back(ZeroedOrThrow(device, DType::kBFloat16, static_cast<size_t>(largest)));
      if (mode_ == Mode::kReduceScatter) {
        bf16_slices_.push_back(ZeroedOrThrow(device, DType::kBFloat16, static_cast<size_t>(slice)));
      }
    }
    bf16_reducing_.resize(buckets_.size());
  }
  final_from_ = static_cast<int64_t>(grads.size());
}

common::Status GradReducer::AfterCompute() {
  SRUNWAY_RETURN_IF_ERROR(device_.Record(*computed_, device_.main_stream()));
  return device_.Wait(*comm_stream_, *computed_);
}

void GradReducer::Arm() {
  armed_ = true;
  final_from_ = static_cast<int64_t>(grads_.size());
  next_bucket_ = 0;
  bf16_done_ = 0;
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
    if (bf16_casts_ != nullptr) {
      SRUNWAY_RETURN_IF_ERROR(StartInBf16(next_bucket_++));
      continue;
    }
    const Bucket& bucket = buckets_[next_bucket_];
    float* data = grads_.data() + bucket.offset;
    launcher::Handle handle;
    if (mode_ == Mode::kAllReduce) {
      SRUNWAY_RETURN_IF_ERROR(AfterCompute());
      SRUNWAY_ASSIGN_OR_RETURN(handle, comm_.IAllReduce(data, data, static_cast<size_t>(bucket.count),
                                                        launcher::DataType::kFloat32, launcher::ReduceOp::kSum));
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
      const size_t bytes = static_cast<size_t>(bucket.count) * sizeof(float);
      SRUNWAY_RETURN_IF_ERROR(device_.Copy(staging.data(), data, bytes, main));
      SRUNWAY_RETURN_IF_ERROR(device_.Zero(staging.as<float>() + bucket.count, staging.bytes() - bytes, main));
      SRUNWAY_RETURN_IF_ERROR(AfterCompute());
      SRUNWAY_ASSIGN_OR_RETURN(handle, comm_.IReduceScatter(staging.data(), reduced_[next_bucket_].data(),
                                                            static_cast<size_t>(bucket.shard),
                                                            launcher::DataType::kFloat32, launcher::ReduceOp::kSum));
    }
    in_flight_.push_back(std::move(handle));
    ++next_bucket_;
  }
  return common::Status::Ok();
}

common::Status GradReducer::StartInBf16(size_t b) {
  const size_t slots = bf16_buckets_.size();
  if (b >= slots) SRUNWAY_RETURN_IF_ERROR(FinishBf16(b - slots + 1));  // the bucket that held the slot
  const Bucket& bucket = buckets_[b];
  Buffer& cast = bf16_buckets_[b % slots];
  bf16_casts_->GradsToBf16(cast.data(), grads_.data() + bucket.offset, bucket.count);
  if (mode_ == Mode::kAllReduce) {
    SRUNWAY_RETURN_IF_ERROR(AfterCompute());
    SRUNWAY_ASSIGN_OR_RETURN(bf16_reducing_[b],
                             comm_.IAllReduce(cast.data(), cast.data(), static_cast<size_t>(bucket.count),
                                              launcher::DataType::kBFloat16, launcher::ReduceOp::kSum));
    return common::Status::Ok();
  }
  // Equal blocks for the collective, as in fp32: the bucket, then zeros up to ranks x shard.
  const size_t bytes = static_cast<size_t>(bucket.count) * sizeof(uint16_t);
  SRUNWAY_RETURN_IF_ERROR(device_.Zero(static_cast<std::byte*>(cast.data()) + bytes,
                                       static_cast<size_t>(bucket.shard * ranks_) * sizeof(uint16_t) - bytes,
                                       device_.main_stream()));
  SRUNWAY_RETURN_IF_ERROR(AfterCompute());
  SRUNWAY_ASSIGN_OR_RETURN(bf16_reducing_[b],
                           comm_.IReduceScatter(cast.data(), bf16_slices_[b % slots].data(),
                                                static_cast<size_t>(bucket.shard), launcher::DataType::kBFloat16,
                                                launcher::ReduceOp::kSum));
  return common::Status::Ok();
}

common::Status GradReducer::FinishBf16(size_t end) {
  for (; bf16_done_ < end; ++bf16_done_) {
    const size_t b = bf16_done_, slot = b % bf16_buckets_.size();
    launcher::Handle handle = std::move(bf16_reducing_[b]);
    SRUNWAY_RETURN_IF_ERROR(handle->Wait());
    if (mode_ == Mode::kAllReduce) {
      bf16_casts_->GradsFromBf16(grads_.data() + buckets_[b].offset, bf16_buckets_[slot].data(), buckets_[b].count);
    } else {
      const ParamRange slice = buckets_[b].Slice(rank_);
      bf16_casts_->GradsFromBf16(grads_.data() + slice.offset, bf16_slices_[slot].data(), slice.count);
    }
  }
  return common::Status::Ok();
}

common::Status GradReducer::TestInFlight() {
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    SRUNWAY_ASSIGN_OR_RETURN(bool done, (*it)->Test());
    it = done ? in_flight_.erase(it) : it + 1;
  }
  // Those in bf16 stay until they are cast back; testing them moves MPI's requests forward.
  if (bf16_casts_ == nullptr) return common::Status::Ok();
  for (size_t b = bf16_done_; b < next_bucket_; ++b) SRUNWAY_RETURN_IF_ERROR(bf16_reducing_[b]->Test().status());
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
  if (bf16_casts_ != nullptr) {
    if (status.ok()) status = FinishBf16(next_bucket_);
    for (launcher::Handle& handle : bf16_reducing_) {  // after an error: none left pending
      if (handle != nullptr) (void)handle->Wait();
      handle.reset();
    }
  }
  if (status.ok() && mode_ == Mode::kReduceScatter && bf16_casts_ == nullptr) {  // bf16's are cast back above
    for (size_t b = 0; b < buckets_.size() && status.ok(); ++b) {
      if (ReducesInPlace(b)) continue;
      const ParamRange slice = buckets_[b].Slice(rank_);
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
