// The pinning policy of the SPANK plugin; see binding.h.
#include "topology/binding.h"

#include <algorithm>
#include <set>

#include "topology/topology.h"

namespace srunway::topology {

BindingDecision DecideBinding(const BindingRequest& request) {
  if (request.affinity == GpuAffinity::kNone) return {{}, "no CPU binding: --gpu-affinity=none", false};
  if (request.user_cpu_bind) {
    const std::string& type = *request.user_cpu_bind;
    if (type.empty() || type == "none") return {{}, "no CPU binding: the user asked for none (--cpu-bind=none)", false};
    return {{}, fmt::format("the user's --cpu-bind={} wins over the GPU's cores", type), false};
  }
  if (request.gpu_cpus.empty()) return {{}, "no CPU binding: no GPU cores for this task", false};
  if (request.allowed.empty()) return {request.gpu_cpus, "bound to its GPU's cores", false};
  std::set<int> allowed(request.allowed.begin(), request.allowed.end());
  std::vector<int> cpus;
  std::ranges::copy_if(request.gpu_cpus, std::back_inserter(cpus), [&](int cpu) { return allowed.contains(cpu); });
  if (cpus.empty()) {
    return {{}, fmt::format("no CPU binding: none of the GPU's cores {} is allowed to this task ({})",
                            FormatCpuList(request.gpu_cpus), FormatCpuList(request.allowed)), true};
  }
  return {cpus, cpus.size() == request.gpu_cpus.size()
                    ? "bound to its GPU's cores"
                    : fmt::format("bound to the GPU's cores that Slurm allows it ({} of {})", FormatCpuList(cpus),
                                  FormatCpuList(request.gpu_cpus)),
          false};
}

}  // namespace srunway::topology
