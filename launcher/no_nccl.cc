// A build without nccl.h and cuda.h: NCCL is never chosen, and asking for it says why.
#include "launcher/nccl_comm.h"

namespace srunway::launcher {

common::StatusOr<std::unique_ptr<Comm>> CreateNcclComm(Bootstrap&, const CommOptions&, bool required) {
  if (!required) return std::unique_ptr<Comm>();
  return common::NotFound("this build has no NCCL backend (nccl.h and cuda.h were not found when it was configured)");
}

}  // namespace srunway::launcher
