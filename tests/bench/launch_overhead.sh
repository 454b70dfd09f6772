#!/usr/bin/env bash
# Benchmark: wall time of 16 ranks over both nodes, in one run, interleaved: bare `srun true`; srunway-launch's
# bootstrap then `true`, supervised (the default: the watchdog's connections, the program as a child) and with
# --no-supervise (exec), over PMIx, and supervised over the Slurm environment + TCP (the default under Slurm, which
# leaves PMIx to the program); srunway-launch --check
# (bootstrap + MPI communicator + collectives); a PMIx program that only does init, one collecting fence and
# finalize (the least any PMIx launcher does); and an Open MPI program that only does MPI_Init/Barrier/Finalize.
# Prints medians and ratios; asserts nothing about time.
source "$(dirname "$0")/../slurm/lib.sh"
require_cluster
launch=${SRUNWAY_LAUNCH:?} mpi_peer=${MPI_INIT_BARRIER:?} pmix_peer=${PMIX_FENCE:?}
rounds=${SRUNWAY_BENCH_ROUNDS:-9}

time_ms() {
  local start end
  start=$(date +%s%N)
  "$@" >/dev/null || fail "failed: $*"
  end=$(date +%s%N)
  echo $(((end - start) / 1000000))
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

declare -a bare exec_pmix exec_nosup exec_slurm check pmix mpi
time_ms srun -N2 -n16 true >/dev/null  # warm-up
for ((i = 0; i < rounds; i++)); do
  bare+=("$(time_ms srun -N2 -n16 true)")
  exec_pmix+=("$(time_ms srun --mpi=pmix -N2 -n16 "$launch" --bootstrap pmix -- true)")
  exec_nosup+=("$(time_ms srun --mpi=pmix -N2 -n16 "$launch" --no-supervise -- true)")
  exec_slurm+=("$(time_ms srun -N2 -n16 "$launch" --bootstrap slurm -- true)")
  check+=("$(time_ms srun --mpi=pmix -N2 -n16 "$launch" --check --bytes 4096)")
  pmix+=("$(time_ms srun --mpi=pmix -N2 -n16 "$pmix_peer")")
  mpi+=("$(time_ms srun --mpi=pmix -N2 -n16 "$mpi_peer")")
done
m_bare=$(printf '%s\n' "${bare[@]}" | median)
m_pmix_exec=$(printf '%s\n' "${exec_pmix[@]}" | median)
m_nosup=$(printf '%s\n' "${exec_nosup[@]}" | median)
m_slurm_exec=$(printf '%s\n' "${exec_slurm[@]}" | median)
m_check=$(printf '%s\n' "${check[@]}" | median)
m_pmix=$(printf '%s\n' "${pmix[@]}" | median)
m_mpi=$(printf '%s\n' "${mpi[@]}" | median)
echo "16 ranks on 2 nodes ($(nproc) CPUs), median of $rounds rounds:"
echo "  srun true                                  ${m_bare} ms"
echo "  srun srunway-launch --bootstrap pmix -- true ${m_pmix_exec} ms  (x$(ratio "$m_pmix_exec" "$m_bare") bare srun, goal <= 1.2;" \
     "x$(ratio "$m_pmix_exec" "$m_pmix") PMIx init/fence/finalize; x$(ratio "$m_pmix_exec" "$m_mpi") MPI init/barrier/finalize)"
echo "  srun srunway-launch --no-supervise -- true ${m_nosup} ms  (x$(ratio "$m_nosup" "$m_pmix") PMIx init/fence/finalize;" \
     "supervision adds x$(ratio "$m_pmix_exec" "$m_nosup"), goal <= 1.05)"
echo "  srun srunway-launch -- true (default, tcp)  ${m_slurm_exec} ms  (x$(ratio "$m_slurm_exec" "$m_bare") bare srun)"
echo "  srun srunway-launch --check (pmix, mpi)    ${m_check} ms  (x$(ratio "$m_check" "$m_bare") bare srun; includes MPI_Init)"
echo "  srun PMIx init/fence/finalize              ${m_pmix} ms  (x$(ratio "$m_pmix" "$m_bare") bare srun)"
echo "  srun MPI init/barrier/finalize             ${m_mpi} ms  (x$(ratio "$m_mpi" "$m_bare") bare srun)"
