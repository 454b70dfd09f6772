// The peer of tests/bench/collbench_vs_mpi.sh: a plain MPI_Allreduce loop (in place, float sum) timed the way
// nccl-tests times, printing "SIZE BUSBW_GBPS" per size from rank 0.
// Usage: mpi_allreduce_loop MIN_BYTES MAX_BYTES FACTOR ITERS WARMUP
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s MIN MAX FACTOR ITERS WARMUP\n", argv[0]);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const long long min = std::atoll(argv[1]), max = std::atoll(argv[2]), factor = std::atoll(argv[3]);
  const int iters = std::atoi(argv[4]), warmup = std::atoi(argv[5]);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (long long bytes = min; bytes <= max; bytes *= factor) {
    std::vector<float> buffer(bytes / 4, 1.0f);
    const int count = static_cast<int>(buffer.size());
    for (int i = 0; i < warmup; ++i) MPI_Allreduce(MPI_IN_PLACE, buffer.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) MPI_Allreduce(MPI_IN_PLACE, buffer.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / iters;
    double mean = 0;
    MPI_Allreduce(&seconds, &mean, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    mean /= size;
    const double busbw = static_cast<double>(bytes) / 1e9 / mean * 2.0 * (size - 1) / size;
    if (rank == 0) std::printf("%lld %.4f\n", bytes, busbw);
  }
  MPI_Finalize();
  return 0;
}
