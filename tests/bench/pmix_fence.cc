// Benchmark peer: the least a PMIx launcher can do to tell every rank about its peers: PMIx_Init, one value put
// and committed, one collecting fence, PMIx_Finalize. srunway-launch's exec mode does this much and then execs.
#include <pmix.h>

#include <cstdio>

int main() {
  pmix_proc_t me;
  if (PMIx_Init(&me, nullptr, 0) != PMIX_SUCCESS) {
    std::fprintf(stderr, "pmix_fence: PMIx_Init failed (run under srun --mpi=pmix)\n");
    return 1;
  }
  pmix_value_t value;
  PMIX_VALUE_LOAD(&value, "peer", PMIX_STRING);
  bool collect = true;
  pmix_info_t info;
  PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
  pmix_proc_t job;
  PMIX_LOAD_PROCID(&job, me.nspace, PMIX_RANK_WILDCARD);
  bool ok = PMIx_Put(PMIX_GLOBAL, "srunway.bench", &value) == PMIX_SUCCESS && PMIx_Commit() == PMIX_SUCCESS &&
            PMIx_Fence(&job, 1, &info, 1) == PMIX_SUCCESS;
  PMIX_VALUE_DESTRUCT(&value);
  PMIX_INFO_DESTRUCT(&info);
  PMIx_Finalize(nullptr, 0);
  if (!ok) std::fprintf(stderr, "pmix_fence: put, commit or fence failed\n");
  return ok ? 0 : 1;
}
