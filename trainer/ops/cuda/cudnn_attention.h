// Causal attention through cuDNN's fused flash-attention engine (SRUNWAY_ATTENTION=cudnn), on attention.cu's
// layout: qkv rows [B, T, (H + 2 KV) hd] read in place as strided Q, K, V; out [B, T, H, hd]; the saved
// log-sum-exp [B, H, T] (natural log, scale included) is cuDNN's softmax statistics, so either direction may fall
// back to attention.cu's kernels alone. cuDNN is opened at run time (SRUNWAY_CUDNN_LIBRARY, the library path,
// the CUDA install, Python wheels' nvidia/cudnn/lib) and its graphs are built with the backend API as
// cudnn-frontend's composite SDPA nodes lower them (matmul, pointwise, reduction and reshape operations that
// the fused engine recognises); a shape whose graph cuDNN cannot run is told once and left to the kernels.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "common/status.h"
#include "trainer/device/device.h"

namespace srunway::trainer::cuda {

struct AttentionShape {
  int B, T, H, KV, hd;
  auto operator<=>(const AttentionShape&) const = default;
};

class CudnnAttention {
 public:
  // For `device`, a GPU that outlives it: loads cuDNN and makes a handle (the error names the library and the
  // paths tried).
  static common::StatusOr<std::unique_ptr<CudnnAttention>> Open(Device& device);
  ~CudnnAttention();

  const std::string& library_path() const;
  // cuDNN's version as cudnnGetVersion gives it (91900 for 9.19.0).
  size_t version() const;

  // NotFound: cuDNN has no engine for this shape, cannot build its graph, or failed to run its plan (told once,
  // and from then on NotFound for the shape at once), or the tensors are not 16-byte aligned; the caller runs its
  // own kernels.
  common::Status Forward(void* out, float* lse, const void* qkv, const AttentionShape& shape, trainer::Stream& stream);
  common::Status Backward(void* dqkv, const void* dout, const void* out, const void* qkv, const float* lse,
                          const AttentionShape& shape, trainer::Stream& stream);

  // Builds and finalizes the forward and backward operation graphs of `shape` with the cuDNN that `library`
  // names (a path or a soname; empty: the one Open would load), which needs no GPU: cuDNN checks each
  // operation's tensors and the graph. For tests.
  static common::Status CheckGraphs(const std::string& library, const AttentionShape& shape);
  // CheckGraphs, then cuDNN's heuristics asked, without a GPU, for an engine that takes each graph on the GPU that
  // `device_json` describes (cuDNN's device-property JSON, as DeviceJson gives it). Ok: an engine took it, or
  // would but for what only a GPU node has (the CUDA driver its run-time compiler needs); NotFound with cuDNN's
  // reason otherwise (an engine that does not recognise the graph as attention says so before it looks for a
  // driver). What the engine checks only when it compiles (head sizes, for one) still needs the GPU.
  static common::Status CheckEngines(const std::string& library, const AttentionShape& shape,
                                     const std::string& device_json);
  // This GPU's properties as cuDNN serializes them, for CheckEngines elsewhere.
  common::StatusOr<std::string> DeviceJson() const;

  struct Api;
  struct Plan;

 private:
  CudnnAttention(std::unique_ptr<Api> api, Device& device);
  common::StatusOr<Plan*> PlanFor(bool backward, const AttentionShape& shape);
  common::Status Run(bool backward, const AttentionShape& shape, const std::map<int64_t, void*>& tensors,
                     trainer::Stream& stream);
  common::Status Execute(Plan& plan, const std::map<int64_t, void*>& pointers, trainer::Stream& stream);

  std::unique_ptr<Api> api_;
  Device& device_;
  Buffer workspace_;
  // Each shape's plans, or why cuDNN could not make one (kept, so it is tried and told once).
  std::map<std::tuple<bool, AttentionShape>, common::StatusOr<std::unique_ptr<Plan>>> plans_;
};

}  // namespace srunway::trainer::cuda
