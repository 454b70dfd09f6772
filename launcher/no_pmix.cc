// The PMIx bootstrap backend in a build configured without PMIx's headers: a clear error instead.
#include "launcher/bootstrap.h"

namespace srunway::launcher {

common::StatusOr<std::unique_ptr<Bootstrap>> CreatePmixBootstrap(std::chrono::milliseconds) {
  return common::NotFound("pmix bootstrap: this build has no PMIx support (configure with -Dpmix=enabled); "
                          "use --bootstrap=slurm under srun --mpi=none");
}

}  // namespace srunway::launcher
