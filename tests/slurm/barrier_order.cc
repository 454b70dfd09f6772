// Slurm suite: a barrier must not let any rank through before every rank has arrived. On the local cluster all
// ranks share one file system, which gives an outside witness: before round k each rank writes k to its own file
// in DIR, and after the round's barrier (odd rounds) or all-gather (even rounds) every file must say k or more.
// Usage: barrier_order DIR ROUNDS [pmix|slurm]. Each late rank seen is one line on stderr; exit 1 if any.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/fs.h"
#include "common/parse.h"
#include "launcher/bootstrap.h"

namespace {

using srunway::common::Status;
namespace launcher = srunway::launcher;

Status WriteRound(const std::string& path, int64_t round) {
  // Written aside and renamed, so a reader sees the old round or the new one, never half a file.
  return srunway::common::WriteFileAtomic(path, std::to_string(round));
}

int64_t ReadRound(const std::string& path) {
  auto text = srunway::common::ReadFile(path);
  if (!text.ok()) return 0;  // not written yet: round 0
  auto round = srunway::common::ParseInt(*text, path, 0, INT64_MAX);
  return round.ok() ? *round : -1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: barrier_order DIR ROUNDS [pmix|slurm]\n");
    return 2;
  }
  const std::string dir = argv[1];
  auto rounds = srunway::common::ParseInt(argv[2], "ROUNDS", 1, 100000);
  auto kind = launcher::ParseBootstrapKind(argc > 3 ? argv[3] : "pmix");
  if (!rounds.ok() || !kind.ok()) {
    std::fprintf(stderr, "barrier_order: %s\n", (!rounds.ok() ? rounds.status() : kind.status()).message().c_str());
    return 2;
  }
  auto bootstrap = launcher::CreateBootstrap(*kind, std::chrono::seconds(60), [](const Status& failure) {
    std::fprintf(stderr, "barrier_order: %s\n", failure.message().c_str());
  });
  if (!bootstrap.ok()) return 2;
  launcher::Bootstrap& boot = **bootstrap;
  const launcher::Identity& id = boot.identity();
  auto path_of = [&](int rank) { return dir + "/rank" + std::to_string(rank); };

  int late = 0;
  for (int64_t round = 1; round <= *rounds; ++round) {
    if (Status written = WriteRound(path_of(id.rank), round); !written.ok()) {
      std::fprintf(stderr, "barrier_order: %s\n", written.message().c_str());
      return 2;
    }
    const bool gather = round % 2 == 0;
    Status passed;
    if (gather) {
      auto values = boot.AllGather(std::to_string(round), "round " + std::to_string(round));
      passed = values.status();
      for (size_t rank = 0; values.ok() && rank < values->size(); ++rank) {
        if ((*values)[rank] != std::to_string(round)) {
          std::fprintf(stderr, "rank %d: all-gather of round %lld gave rank %zu's value '%s'\n", id.rank,
                       static_cast<long long>(round), rank, (*values)[rank].c_str());
          ++late;
        }
      }
    } else {
      passed = boot.Barrier("round " + std::to_string(round));
    }
    if (!passed.ok()) {
      std::fprintf(stderr, "barrier_order: %s\n", passed.message().c_str());
      return 2;
    }
    for (int rank = 0; rank < id.size; ++rank) {
      int64_t seen = ReadRound(path_of(rank));
      if (seen < round) {
        std::fprintf(stderr, "rank %d on %s: the %s of round %lld let it through while rank %d was at round %lld\n",
                     id.rank, id.host.c_str(), gather ? "all-gather" : "barrier", static_cast<long long>(round), rank,
                     static_cast<long long>(seen));
        ++late;
      }
    }
    ::usleep(static_cast<useconds_t>((id.rank * 7919 + round * 104729) % 2000));  // vary who arrives last
  }
  if (Status finalized = boot.Finalize(); !finalized.ok()) {
    std::fprintf(stderr, "barrier_order: %s\n", finalized.message().c_str());
    return 2;
  }
  if (id.rank == 0 && late == 0) {
    std::printf("barrier order ok: %lld rounds, %d ranks on %d nodes\n", static_cast<long long>(*rounds), id.size,
                id.node_count);
  }
  return late == 0 ? 0 : 1;
}
