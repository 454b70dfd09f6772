// Slurm suite: Open MPI started directly by srun --mpi=pmix; an all-reduce of the ranks over both nodes.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long mine = rank, sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  const long expected = static_cast<long>(size) * (size - 1) / 2;
  int ok = sum == expected ? 1 : 0, all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  if (!ok) std::fprintf(stderr, "mpi_allreduce: rank %d got %ld, expected %ld\n", rank, sum, expected);
  if (rank == 0 && all_ok) std::printf("mpi allreduce ok: %d ranks, sum %ld\n", size, sum);
  MPI_Finalize();
  return all_ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
