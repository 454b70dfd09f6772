// Data-parallel gradient reduction in buckets, started while the backward still runs (PyTorch DDP's scheme on
// one flat buffer). The backward reports ranges of the gradient buffer as they become final, from its end to its
// start; a bucket's all-reduce starts as soon as every range it covers is final, and requests in flight are tested
// between layers so that MPI moves them forward.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "launcher/comm.h"
#include "trainer/model/params.h"

namespace srunway::trainer {

class GradReducer {
 public:
  // Buckets of at most `bucket_bytes` (at least one float) tile `grads` from its end. Each rank's gradients must
  // already be scaled by 1 / (micro-batches on all ranks): the reduction is a sum, so the result is the mean.
  // `overlap` false: nothing starts before Finish() (--no-overlap-grad-reduce).
  GradReducer(launcher::Comm& comm, std::span<float> grads, size_t bucket_bytes, bool overlap);

  // The next backward is the last micro-batch of the step: its ranges start reductions. Until then Ready() does
  // nothing (nothing is reduced on the other micro-batches of gradient accumulation).
  void Arm();
  // From Model::Backward: `range` is final. Ranges must come from the end of the buffer down without gaps.
  void Ready(ParamRange range);
  // Starts what is left, waits for every reduction, and disarms. The first error of any reduction.
  common::Status Finish();

  size_t bucket_count() const { return buckets_.size(); }
  // Reductions started before the backward ended, in the last step (0 without overlap).
  int started_early() const { return started_early_; }
  // Time spent in Finish() waiting for reductions, in the last step.
  double wait_ms() const { return wait_ms_; }

 private:
  common::Status StartUpTo(int64_t final_from);
  common::Status TestInFlight();

  launcher::Comm& comm_;
  std::span<float> grads_;
  bool overlap_;
  std::vector<ParamRange> buckets_;  // from the end of the buffer to its start
  bool armed_ = false;
  int64_t final_from_ = 0;  // grads_[final_from_, end) are final
  size_t next_bucket_ = 0;
  std::vector<launcher::Handle> in_flight_;
  common::Status error_;
  int started_early_ = 0;
  double wait_ms_ = 0;
};

}  // namespace srunway::trainer
