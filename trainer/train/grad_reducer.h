// Data-parallel gradient reduction in buckets, started while the backward still runs (PyTorch DDP's scheme on
// one flat buffer), and ZeRO-1's sharding of the same buckets (Megatron's distributed optimizer). The backward
// reports ranges of the gradient buffer as they become final, from its end to its start; a bucket's reduction
// starts as soon as every range it covers is final, and requests in flight are tested between layers so that MPI
// moves them forward. The buffers live on the model's Device: on a GPU each collective is queued on the
// communicator's stream behind an event of the compute stream, so it starts once the GPU (not the host) has
// produced the bucket.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/status.h"
#include "launcher/comm.h"
#include "trainer/device/device.h"
#include "trainer/model/params.h"
#include "trainer/ops/ops.h"

namespace srunway::trainer {

// A bucket of the flat buffer and, under ZeRO-1, each rank's slice of it: rank r owns [offset + r * shard,
// offset + min((r + 1) * shard, count)), possibly empty.
struct Bucket {
  int64_t offset = 0;
  int64_t count = 0;
  int64_t shard = 0;  // ceil(count / ranks)
  ParamRange Slice(int rank) const;
};

// Buckets of at most `bucket_bytes` (at least one float) tiling `numel` floats from the end of the buffer.
std::vector<Bucket> MakeBuckets(int64_t numel, size_t bucket_bytes, int ranks);
// Rank `rank`'s slices of every bucket (ZeRO-1's ownership), empty ones left out.
std::vector<ParamRange> OwnedRanges(const std::vector<Bucket>& buckets, int rank);

class GradReducer {
 public:
  enum class Mode {
    kAllReduce,      // every rank gets every reduced gradient
    kReduceScatter,  // ZeRO-1: each rank gets its slice of each bucket, reduced (the rest is left as it was)
  };
  // Each rank's gradients must already be scaled by 1 / (micro-batches on all ranks): the reduction is a sum, so
  // the result is the mean. `overlap` false: nothing starts before Finish() (--no-overlap-grad-reduce). `grads`
  // is in the memory of `device` (the model's), which `comm` must be able to reduce (host memory for MPI, the
  // GPU's for NCCL). ZeRO-1 all-gathers the weights the ops read, of `weights_type` (Model::weights_type()).
  // With `bf16_casts` (the model's ops), the buckets travel in bf16 (Megatron's --grad-reduce-in-bf16: half the
  // bytes): each is cast to bf16 on the compute stream when complete, its collective sums in bf16, and the sums are
  // cast back into the gradients, through kBf16Slots buckets' worth of bf16 copies (a bucket waits for the one that
  // held its slot). Throws DeviceFull when the device cannot hold the staging buffers.
  GradReducer(launcher::Comm& comm, Device& device, std::span<float> grads, std::vector<Bucket> buckets, Mode mode,
              bool overlap, DType weights_type = DType::kFloat32, Ops* bf16_casts = nullptr);
  static constexpr size_t kBf16Slots = 4;

  // The next backward is the last micro-batch of the step: its ranges start reductions. Until then Ready() does
  // nothing (nothing is reduced on the other micro-batches of gradient accumulation).
  void Arm();
  // From Model::Backward: `range` is final. Ranges must come from the end of the buffer down without gaps.
  void Ready(ParamRange range);
  // Starts what is left, waits for every reduction, and disarms. The first error of any reduction.
  common::Status Finish();

  // ZeRO-1, after the optimizer step: starts an all-gather per bucket, from the start of the buffer (what the
  // next forward needs first) to its end, that brings every rank's slices of `weights` (Model::weights(), which
  // the optimizer updated on the rank's slices: the GPU's bf16 copy, half the bytes of the fp32 parameters, or
  // the parameters themselves on the host) to every rank.
  common::Status StartGather(void* weights);
  // Waits for the gathers of the buckets that hold any of [0, range end) and puts them in place: the forward asks
  // before each part it reads, so the rest keeps arriving while it computes.
  common::Status Need(ParamRange range);
  // Waits for every gather (before evaluation, a checkpoint, the export).
  common::Status FinishGather() { return Need({0, static_cast<int64_t>(grads_.size())}); }
  // ZeRO-1 with sharded fp32 parameters (Model::masters()), every rank at once: every rank's `packed` slices (in
  // the order of OwnedRanges) into `whole` on the host, bucket by bucket through one bucket of device memory; on
  // the ranks that pass an empty `whole` (all but the exporting one), only their part.
  common::Status GatherMasters(std::span<const float> packed, std::span<float> whole);

  const std::vector<Bucket>& buckets() const { return buckets_; }
  size_t bucket_count() const { return buckets_.size(); }
  // Reductions started before the backward ended, in the last step (0 without overlap).
  int started_early() const { return started_early_; }
  // Time spent in Finish() waiting for reductions, in the last step.
  double wait_ms() const { return wait_ms_; }

 private:
  common::Status StartUpTo(int64_t final_from);
  // --grad-reduce-in-bf16: bucket b cast into its slot and its collective started; the buckets up to `end` waited
  // for and cast back, in order.
  common::Status StartInBf16(size_t b);
  common::Status FinishBf16(size_t end);
  common::Status TestInFlight();
  // The communicator's next operation waits for everything queued on the compute stream so far.
  common::Status AfterCompute();
  // ZeRO-1: bucket b is reduce-scattered inside the gradients / all-gathered inside the weights (no copy).
  bool ReducesInPlace(size_t b) const { return staging_[b].data() == nullptr; }
  bool GathersInPlace(size_t b) const { return gathered_[b].data() == nullptr; }

  launcher::Comm& comm_;
  Device& device_;
  std::unique_ptr<Stream> comm_stream_;  // the communicator's own stream, adopted
  std::unique_ptr<Event> computed_;
  std::span<float> grads_;
  std::vector<Bucket> buckets_;  // from the end of the buffer to its start
  Mode mode_;
  bool overlap_;
  DType weights_type_;
  int rank_, ranks_;
  // ZeRO-1: per bucket, ranks x shard floats to reduce-scatter from, and the reduced slice; and ranks x shard
  // weights to all-gather into (apart: the next backward's reduce-scatter may start before the forward has asked
  // for every bucket). Empty (no memory) for a bucket of exactly ranks x shard elements, which is reduced (NCCL,
  // one rank: MPI's reduce-scatter takes no aliased buffers) and gathered in place, in the gradients and the
  // weights themselves: otherwise these copies would double ZeRO-1's memory rather than save it.
  std::vector<Buffer> staging_, reduced_, gathered_;
  // --grad-reduce-in-bf16: per slot, a bucket in bf16 (under ZeRO-1 padded to ranks x shard) and, under ZeRO-1, its
  // reduced slice; per bucket, its collective until its sums are cast back; buckets [0, bf16_done_) are.
  Ops* bf16_casts_;
  std::vector<Buffer> bf16_buckets_, bf16_slices_;
  std::vector<launcher::Handle> bf16_reducing_;
  size_t bf16_done_ = 0;
  bool armed_ = false;
  int64_t final_from_ = 0;  // grads_[final_from_, end) are final
  size_t next_bucket_ = 0;
  std::vector<launcher::Handle> in_flight_;
  std::vector<launcher::Handle> gathers_;  // per bucket, while its all-gather is in flight
  void* gather_into_ = nullptr;
  common::Status error_;
  int started_early_ = 0;
  double wait_ms_ = 0;
};

}  // namespace srunway::trainer
