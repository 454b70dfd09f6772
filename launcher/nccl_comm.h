// The NCCL backend of Comm, for comm.cc: libnccl and the CUDA driver are opened at run time, so one build runs on
// GPU nodes and CPU-only nodes alike.
#pragma once

#include <memory>

#include "common/status.h"
#include "launcher/bootstrap.h"
#include "launcher/comm.h"

namespace srunway::launcher {

// Every rank calls it. The ranks tell each other whether they can use NCCL (a GPU of their own and a library
// that loads) in the same exchange that shares the unique ids. When one cannot, `required` makes that an error
// naming the rank and why; otherwise every rank returns an empty pointer and the caller falls back.
common::StatusOr<std::unique_ptr<Comm>> CreateNcclComm(Bootstrap& bootstrap, const CommOptions& options,
                                                       bool required);

}  // namespace srunway::launcher
