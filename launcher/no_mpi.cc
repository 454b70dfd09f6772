// A build without MPI: asking for the MPI communicator says why it cannot be had.
#include "launcher/mpi_comm.h"

namespace srunway::launcher {

common::StatusOr<std::unique_ptr<Comm>> CreateMpiComm(int, int, const CommOptions&) {
  return common::NotFound("this build has no MPI (configure with -Dmpi=enabled)");
}

}  // namespace srunway::launcher
