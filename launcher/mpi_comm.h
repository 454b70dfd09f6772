// The MPI backend of Comm (Open MPI under srun --mpi=pmix): CPU ranks, host memory. Built when meson finds MPI;
// otherwise no_mpi.cc says so.
#pragma once

#include <memory>

#include "common/status.h"
#include "launcher/comm.h"

namespace srunway::launcher {

// MPI_COMM_WORLD (MPI_Init first if needed), checked to be the world of `rank` and `size` the bootstrap found.
// Every call that waits for the other ranks (MPI_Init, a blocking collective, a request's Wait, MPI_Finalize) has
// `options.timeout`; past it the process ends through `options.on_stuck`.
common::StatusOr<std::unique_ptr<Comm>> CreateMpiComm(int rank, int size, const CommOptions& options);

}  // namespace srunway::launcher
