// Megatron's --check-weight-hash-across-dp-replicas-interval: data parallelism keeps every rank's weights the same
// bit for bit (each applies the same reduced gradients, or ZeRO-1 gathers the same slices), so ranks whose weights
// hash differently have met a fault: a flipped bit in a GPU's or a host's memory, a corrupted transfer. Every this
// many steps the ranks hash the weights the ops read and compare; the run ends unsaved where they differ, and the
// ranks that hold other weights than most are named.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "trainer/device/device.h"

namespace srunway::trainer {

// XXH3-64 of `bytes` bytes at `data` in `device`'s memory: read in place on the host, else brought to the host
// `block` bytes at a time (after the work queued on the main stream), so that the check needs no second copy of
// the weights.
common::StatusOr<uint64_t> HashDeviceBytes(Device& device, const void* data, size_t bytes,
                                           size_t block = size_t{64} << 20);

// The ranks' hashes compared, `name` giving each rank's name ("rank 3 on node2"): empty where they are all the
// same. Else, where more than half of the ranks share a hash, the others are named with theirs: "rank 3 on node2
// (hash 00000000deadbeef) holds other weights than the 3 other ranks (hash 0123456789abcdef)"; where no hash is
// most ranks', each group of ranks with its hash ("no hash is held by more than half of the ranks: rank 0 on node1
// has hash ...; rank 1 on node2 has hash ..."). A group of more than four ranks names four and says how many more.
std::string DescribeReplicas(const std::vector<uint64_t>& hashes, const std::function<std::string(int rank)>& name);

}  // namespace srunway::trainer
