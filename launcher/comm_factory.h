// Chooses and builds a rank's communicator: the one place that knows both the bootstrap and the backends.
#pragma once

#include <memory>

#include "common/status.h"
#include "launcher/bootstrap.h"
#include "launcher/comm.h"

namespace srunway::launcher {

// auto: NCCL when every rank has a GPU and NCCL loads; else MPI when there is more than one rank, self for one.
// The ranks agree on the choice through `bootstrap` (one all-gather that also carries NCCL's unique ids), so a
// rank without a GPU cannot leave the others waiting. With kNccl, a rank that cannot use NCCL is an error on
// every rank that names it and says why.
common::StatusOr<std::unique_ptr<Comm>> CreateComm(CommKind kind, Bootstrap& bootstrap,
                                                   const CommOptions& options = {});

}  // namespace srunway::launcher
