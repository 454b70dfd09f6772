// Finding the site's GPU libraries (NCCL, cuBLASLt, cuDNN) at run time, where clusters and PyTorch installs keep
// them, so one binary needs no LD_LIBRARY_PATH set up for it. In order: the file an environment variable names
// (alone: if it does not load, that is the error); the dynamic linker's search path (LD_LIBRARY_PATH,
// ld.so.cache); the CUDA install ($CUDA_HOME, $CUDA_PATH, /usr/local/cuda: lib64, lib, targets/*/lib); the
// nvidia/*/lib folders of installed Python wheels (nvidia-nccl-cu13, nvidia-cublas, nvidia-cudnn: what PyTorch
// brings) under $VIRTUAL_ENV, $CONDA_PREFIX, ~/.local, /usr/local, /usr and /opt/conda.
#pragma once

#include <string>
#include <vector>

#include "common/dynlib.h"
#include "common/status.h"

namespace srunway::common {

struct SiteLibrary {
  std::string env_var;             // "SRUNWAY_NCCL_LIBRARY"
  std::vector<std::string> names;  // {"libnccl.so.2", "libnccl.so"}: the first that loads
};

// The folders searched after the dynamic linker's path, in order, those that exist.
std::vector<std::string> SiteLibraryDirs();

// The library, or NotFound naming what was tried and the variable that would point at it.
StatusOr<DynamicLibrary> OpenSiteLibrary(const SiteLibrary& library);

}  // namespace srunway::common
