// A build without nccl.h and cuda.h: NCCL is never chosen, and asking for it says why.
#include "launcher/nccl_comm.h"

namespace srunway::launcher {

struct NcclRuntime {};

namespace {
constexpr char kWhy[] = "this build has no NCCL backend (nccl.h and cuda.h were not found when it was configured)";
}  // namespace

NcclLocal OpenNccl(int) { return NcclLocal{nullptr, kWhy, "", false}; }

common::StatusOr<std::string> MakeNcclUniqueId(const NcclLocal&) { return common::NotFound("{}", kWhy); }

common::StatusOr<std::unique_ptr<Comm>> CreateNcclComm(const NcclLocal&, const std::vector<std::string>&, int, int,
                                                       std::chrono::milliseconds) {
  return common::NotFound("{}", kWhy);
}

}  // namespace srunway::launcher
