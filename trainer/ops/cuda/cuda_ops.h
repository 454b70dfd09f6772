// The GPU's Ops: the kernels of trainer/ops/cuda and cuBLASLt's products, queued on the device's main stream.
#pragma once

#include <memory>

#include "common/status.h"
#include "trainer/device/device.h"
#include "trainer/ops/ops.h"

namespace srunway::trainer::cuda {

// For `device`, a GPU that outlives them; loads cuBLASLt (the error names it when it cannot).
common::StatusOr<std::unique_ptr<Ops>> NewCudaOps(Device& device);

}  // namespace srunway::trainer::cuda
