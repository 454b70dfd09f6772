// NewCudaDevice in a build without cuda.h: the trainer runs on the host only.
#include "trainer/device/device.h"

namespace srunway::trainer {

common::StatusOr<std::unique_ptr<Device>> NewCudaDevice(int) {
  return common::FailedPrecondition("this build has no GPU support (cuda.h was not found when it was built)");
}

}  // namespace srunway::trainer
