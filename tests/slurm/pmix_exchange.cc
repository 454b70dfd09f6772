// Slurm suite: every rank publishes its rank and node through PMIx put/commit/fence and reads back every peer's.
// Rank 0 prints one summary line; any rank that sees a wrong or missing value exits non-zero naming it.
#include <pmix.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "common/env.h"

namespace {

constexpr const char* kKey = "srunway.test.identity";

int Fail(const pmix_proc_t& me, const std::string& what, pmix_status_t status) {
  std::fprintf(stderr, "pmix_exchange: rank %u: %s: %s\n", me.rank, what.c_str(), PMIx_Error_string(status));
  return EXIT_FAILURE;
}

}  // namespace

int main() {
  pmix_proc_t me;
  pmix_status_t status = PMIx_Init(&me, nullptr, 0);
  if (status != PMIX_SUCCESS) {
    std::fprintf(stderr, "pmix_exchange: PMIx_Init: %s (run under srun --mpi=pmix)\n", PMIx_Error_string(status));
    return EXIT_FAILURE;
  }
  pmix_proc_t job;
  PMIX_LOAD_PROCID(&job, me.nspace, PMIX_RANK_WILDCARD);
  pmix_value_t* value = nullptr;
  if ((status = PMIx_Get(&job, PMIX_JOB_SIZE, nullptr, 0, &value)) != PMIX_SUCCESS) {
    return Fail(me, "get job size", status);
  }
  const uint32_t size = value->data.uint32;
  PMIX_VALUE_RELEASE(value);

  const std::string node = srunway::common::GetEnvOr("SLURMD_NODENAME", "unknown");
  const std::string identity = std::to_string(me.rank) + "@" + node;
  pmix_value_t mine;
  PMIX_VALUE_LOAD(&mine, identity.c_str(), PMIX_STRING);
  if ((status = PMIx_Put(PMIX_GLOBAL, kKey, &mine)) != PMIX_SUCCESS) return Fail(me, "put", status);
  PMIX_VALUE_DESTRUCT(&mine);
  if ((status = PMIx_Commit()) != PMIX_SUCCESS) return Fail(me, "commit", status);
  pmix_info_t collect;
  bool yes = true;
  PMIX_INFO_LOAD(&collect, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
  if ((status = PMIx_Fence(&job, 1, &collect, 1)) != PMIX_SUCCESS) return Fail(me, "fence", status);
  PMIX_INFO_DESTRUCT(&collect);

  std::map<std::string, int> ranks_per_node;
  for (uint32_t rank = 0; rank < size; ++rank) {
    pmix_proc_t peer;
    PMIX_LOAD_PROCID(&peer, me.nspace, rank);
    if ((status = PMIx_Get(&peer, kKey, nullptr, 0, &value)) != PMIX_SUCCESS) {
      return Fail(me, "get from rank " + std::to_string(rank), status);
    }
    std::string text = value->type == PMIX_STRING ? value->data.string : "";
    PMIX_VALUE_RELEASE(value);
    size_t at = text.find('@');
    if (at == std::string::npos || text.substr(0, at) != std::to_string(rank)) {
      std::fprintf(stderr, "pmix_exchange: rank %u read '%s' from rank %u\n", me.rank, text.c_str(), rank);
      return EXIT_FAILURE;
    }
    ++ranks_per_node[text.substr(at + 1)];
  }
  if (me.rank == 0) {
    std::string nodes;
    for (const auto& [name, count] : ranks_per_node) nodes += " " + name + ":" + std::to_string(count);
    std::printf("pmix exchange ok: %u ranks on %zu nodes:%s\n", size, ranks_per_node.size(), nodes.c_str());
  }
  PMIx_Finalize(nullptr, 0);
  return EXIT_SUCCESS;
}
