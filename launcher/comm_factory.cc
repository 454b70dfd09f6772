// Chooses and builds a rank's communicator. The NCCL offers travel as JSON; a peer's offer is parsed, never
// trusted, and a malformed one is an error naming the rank.
#include "launcher/comm_factory.h"

#include <map>
#include <utility>
#include <vector>

#include "common/env.h"
#include "common/json.h"
#include "launcher/mpi_comm.h"
#include "launcher/nccl_comm.h"
#include "launcher/self_comm.h"

namespace srunway::launcher {
namespace {

using common::Status;
using common::StatusOr;

// Ranks per unique id for ncclCommInitRankScalable (SRUNWAY_NCCL_RANKS_PER_ID, else 128); smaller worlds use one
// id and ncclCommInitRankConfig. A value that is not a count is an error on every rank alike (srun hands them one
// environment), never a silent 128.
StatusOr<int> RanksPerId() {
  if (!common::GetEnv("SRUNWAY_NCCL_RANKS_PER_ID")) return 128;
  SRUNWAY_ASSIGN_OR_RETURN(const int64_t value, common::GetEnvInt("SRUNWAY_NCCL_RANKS_PER_ID", 1, 1 << 20));
  return static_cast<int>(value);
}

// Rank `r` makes unique id i when r is the first rank of id i's share of the world.
int IdCreator(int id, int ids, int size) { return static_cast<int>(static_cast<int64_t>(id) * size / ids); }

std::string Hex(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) out += fmt::format("{:02x}", c);
  return out;
}

StatusOr<std::string> Unhex(std::string_view hex, std::string_view what) {
  if (hex.size() % 2 != 0) return common::InvalidArgument("{}: odd-length hex", what);
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    int value = 0;
    for (char c : hex.substr(i, 2)) {
      const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (digit < 0) return common::InvalidArgument("{}: '{}' is not hex", what, c);
      value = value * 16 + digit;
    }
    out += static_cast<char>(value);
  }
  return out;
}

// One rank's part of the exchange.
struct Offer {
  bool usable = false;
  std::string why_not, host, bus_id;
  bool scalable = false;
  std::vector<std::string> ids;  // the ncclUniqueIds it made, raw bytes
};

std::string Encode(const Offer& offer) {
  if (!offer.usable) return common::Json{{"usable", false}, {"why_not", offer.why_not}}.dump();
  common::Json ids = common::Json::array();
  for (const std::string& id : offer.ids) ids.push_back(Hex(id));
  return common::Json{{"usable", true}, {"host", offer.host}, {"bus_id", offer.bus_id}, {"scalable", offer.scalable},
                      {"ids", ids}}
      .dump();
}

StatusOr<Offer> Decode(const std::string& text, const std::string& who) {
  const std::string where = who + "'s NCCL offer";
  SRUNWAY_ASSIGN_OR_RETURN(common::Json json, common::ParseJson(text, where));
  Offer offer;
  SRUNWAY_ASSIGN_OR_RETURN(offer.usable, common::JsonField<bool>(json, "usable", where));
  if (!offer.usable) {
    SRUNWAY_ASSIGN_OR_RETURN(offer.why_not, common::JsonField<std::string>(json, "why_not", where));
    return offer;
  }
  SRUNWAY_ASSIGN_OR_RETURN(offer.host, common::JsonField<std::string>(json, "host", where));
  SRUNWAY_ASSIGN_OR_RETURN(offer.bus_id, common::JsonField<std::string>(json, "bus_id", where));
  SRUNWAY_ASSIGN_OR_RETURN(offer.scalable, common::JsonField<bool>(json, "scalable", where));
  SRUNWAY_ASSIGN_OR_RETURN(std::vector<std::string> ids, common::JsonField<std::vector<std::string>>(json, "ids", where));
  for (const std::string& id : ids) {
    SRUNWAY_ASSIGN_OR_RETURN(std::string bytes, Unhex(id, where));
    offer.ids.push_back(std::move(bytes));
  }
  return offer;
}

// Every rank calls it. The ranks tell each other whether they can use NCCL (a GPU of their own and a library
// that loads) in the same exchange that shares the unique ids. When one cannot, `required` makes that an error
// naming the rank and why; otherwise every rank returns an empty pointer and the caller falls back.
StatusOr<std::unique_ptr<Comm>> NcclIfEveryRankCan(Bootstrap& bootstrap, const CommOptions& options, bool required,
                                                   int ranks_per_id) {
  const Identity& me = bootstrap.identity();
  const int size = me.size;
  // Opening the CUDA driver and NCCL and taking the GPU is timed apart from the exchange, to see where start-up
  // goes (the driver's initialisation alone can take hundreds of milliseconds).
  if (options.on_phase) options.on_phase("driver and nccl load");
  NcclLocal local = OpenNccl(me.local_rank);
  Offer mine;
  // The ids this rank makes: with ncclCommInitRankScalable, one per ranks_per_id ranks; rank 0 always makes id 0.
  const int scalable_ids = (size + ranks_per_id - 1) / ranks_per_id;
  if (local.runtime != nullptr) {
    mine.usable = true;
    mine.host = me.host;
    mine.bus_id = local.bus_id;
    mine.scalable = local.scalable && scalable_ids > 1;
    const int ids = mine.scalable ? scalable_ids : 1;
    for (int i = 0; i < ids; ++i) {
      if (IdCreator(i, ids, size) != me.rank) continue;
      auto id = MakeNcclUniqueId(local);
      if (!id.ok()) {
        mine = Offer{};
        mine.why_not = id.status().message();
        break;
      }
      mine.ids.push_back(std::move(*id));
    }
  } else {
    mine.why_not = local.why_not;
  }
  if (options.on_phase) options.on_phase("id broadcast");
  SRUNWAY_ASSIGN_OR_RETURN(auto all, bootstrap.AllGather(Encode(mine), "id broadcast"));

  std::vector<Offer> offers;
  bool everyone = true, all_scalable = true;
  for (int r = 0; r < size; ++r) {
    SRUNWAY_ASSIGN_OR_RETURN(Offer offer, Decode(all[static_cast<size_t>(r)], bootstrap.NameRank(r)));
    if (!offer.usable) {
      if (required) return common::FailedPrecondition("{} cannot use NCCL: {}", bootstrap.NameRank(r), offer.why_not);
      everyone = false;
    }
    all_scalable &= offer.scalable;
    offers.push_back(std::move(offer));
  }
  if (!everyone) return std::unique_ptr<Comm>();
  std::map<std::pair<std::string, std::string>, int> owner;
  for (int r = 0; r < size; ++r) {
    auto [it, fresh] = owner.emplace(std::pair{offers[r].host, offers[r].bus_id}, r);
    if (!fresh) {
      return common::FailedPrecondition("{} and rank {} would share GPU {}: NCCL needs one GPU per rank (use "
                                        "--gpus-per-task=1, or no more tasks per node than GPUs)",
                                        bootstrap.NameRank(it->second), r, offers[r].bus_id);
    }
  }
  // The ids in order: id i from its creator's offer (a creator made its ids in order).
  const int ids = all_scalable ? scalable_ids : 1;
  std::vector<std::string> unique_ids;
  std::vector<size_t> taken(static_cast<size_t>(size), 0);
  for (int i = 0; i < ids; ++i) {
    const int creator = IdCreator(i, ids, size);
    const std::vector<std::string>& made = offers[static_cast<size_t>(creator)].ids;
    size_t& at = taken[static_cast<size_t>(creator)];
    if (at >= made.size()) return common::Internal("{} sent too few NCCL ids", bootstrap.NameRank(creator));
    unique_ids.push_back(made[at++]);
  }
  if (options.on_phase) options.on_phase("communicator init");
  return CreateNcclComm(local, unique_ids, me.rank, size, options.timeout);
}

}  // namespace

StatusOr<std::unique_ptr<Comm>> CreateComm(CommKind kind, Bootstrap& bootstrap, const CommOptions& options) {
  const int size = bootstrap.identity().size;
  if (kind == CommKind::kAuto || kind == CommKind::kNccl) {
    SRUNWAY_ASSIGN_OR_RETURN(const int ranks_per_id, RanksPerId());
    // Under auto, an empty result: some rank cannot use NCCL, and every rank knows it and falls back alike.
    SRUNWAY_ASSIGN_OR_RETURN(
        auto nccl, NcclIfEveryRankCan(bootstrap, options, /*required=*/kind == CommKind::kNccl, ranks_per_id));
    if (nccl != nullptr) return nccl;
    kind = size == 1 ? CommKind::kSelf : CommKind::kMpi;
  }
  if (options.on_phase) options.on_phase("communicator init");
  switch (kind) {
    case CommKind::kSelf:
      if (size != 1) return common::InvalidArgument("the self communicator needs one rank, not {}", size);
      return CreateSelfComm();
    case CommKind::kMpi:
      // Open MPI finds its peers through PMIx; without it MPI_Init aborts the process with a page of text.
      if (!common::GetEnv("PMIX_RANK") && !common::GetEnv("OMPI_COMM_WORLD_RANK")) {
        return common::FailedPrecondition("the MPI communicator needs srun --mpi=pmix (or mpirun)");
      }
      return CreateMpiComm(bootstrap.identity().rank, size, options);
    default:
      break;
  }
  return common::InvalidArgument("no communicator chosen");
}

}  // namespace srunway::launcher
