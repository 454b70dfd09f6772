// See cudnn_attention.h. The graphs, as cudnn-frontend's composite SDPA nodes lower them for cuDNN 9 (every
// intermediate fp32 and virtual unless said; S = [B, H, T, T]):
//   forward:  S = Q K^T, S *= scale, S = causal(S), m = max_row(S), E = exp(S - m), l = sum_row(E),
//             stats = m + log(l), P = E / l (bf16), O = P V
//   backward: D = sum_row(dO o O) (fp32, workspace), S as above, E = exp(causal(S) - stats), dV = E^T dO,
//             dP = dO V^T, dS = (dP - D) o E o scale, dK = dS^T Q, dQacc = dS K (fp32, workspace, zeroed),
//             dQ = dQacc
// causal(S) = row index >= column index ? S : lowest float. K and V enter as K^T and V^T (strides swapped), the
// transposes P^T, dS^T and K back from K^T as reshapes; with fewer K/V heads than query heads (GQA) dK and dV
// are the per-query-head products summed over each group by a reduction.
#include "trainer/ops/cuda/cudnn_attention.h"

#include <cudnn_graph.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <limits>
#include <utility>
#include <vector>

#include "common/log.h"
#include "common/site_library.h"

namespace srunway::trainer::cuda {

using common::Status;
using common::StatusOr;

struct CudnnAttention::Api {
  common::DynamicLibrary lib;
  cudnnHandle_t handle = nullptr;
  decltype(::cudnnGetVersion)* get_version = nullptr;
  decltype(::cudnnGetErrorString)* error_string = nullptr;
  decltype(::cudnnGetLastErrorString)* last_error = nullptr;
  decltype(::cudnnCreate)* create = nullptr;
  decltype(::cudnnDestroy)* destroy = nullptr;
  decltype(::cudnnSetStream)* set_stream = nullptr;
  decltype(::cudnnBackendCreateDescriptor)* create_descriptor = nullptr;
  decltype(::cudnnBackendDestroyDescriptor)* destroy_descriptor = nullptr;
  decltype(::cudnnBackendSetAttribute)* set_attribute = nullptr;
  decltype(::cudnnBackendGetAttribute)* get_attribute = nullptr;
  decltype(::cudnnBackendFinalize)* finalize = nullptr;
  decltype(::cudnnBackendExecute)* execute = nullptr;

  static StatusOr<std::unique_ptr<Api>> Load(common::DynamicLibrary lib) {
    auto api = std::make_unique<Api>(Api{std::move(lib), {}});
    SRUNWAY_LOAD_SYMBOL(api->get_version, api->lib, cudnnGetVersion);
    SRUNWAY_LOAD_SYMBOL(api->error_string, api->lib, cudnnGetErrorString);
    api->last_error = api->lib.OptionalSymbol<decltype(::cudnnGetLastErrorString)>("cudnnGetLastErrorString");
    SRUNWAY_LOAD_SYMBOL(api->create, api->lib, cudnnCreate);
    SRUNWAY_LOAD_SYMBOL(api->destroy, api->lib, cudnnDestroy);
    SRUNWAY_LOAD_SYMBOL(api->set_stream, api->lib, cudnnSetStream);
    SRUNWAY_LOAD_SYMBOL(api->create_descriptor, api->lib, cudnnBackendCreateDescriptor);
    SRUNWAY_LOAD_SYMBOL(api->destroy_descriptor, api->lib, cudnnBackendDestroyDescriptor);
    SRUNWAY_LOAD_SYMBOL(api->set_attribute, api->lib, cudnnBackendSetAttribute);
    SRUNWAY_LOAD_SYMBOL(api->get_attribute, api->lib, cudnnBackendGetAttribute);
    SRUNWAY_LOAD_SYMBOL(api->finalize, api->lib, cudnnBackendFinalize);
    SRUNWAY_LOAD_SYMBOL(api->execute, api->lib, cudnnBackendExecute);
    if (api->get_version() < 90000) {
      return common::NotFound("{} is cuDNN {}: the fused attention graphs need cuDNN 9", api->lib.path(),
                              api->get_version());
    }
    return api;
  }

  // cuDNN's own account of the last failure, where it keeps one.
  std::string LastError() const {
    if (last_error == nullptr) return "";
    char message[1024] = {};
    last_error(message, sizeof message);
    return message;
  }
  std::string Detail() const {
    const std::string message = LastError();
    return message.empty() ? "" : fmt::format(" ({})", message);
  }
  Status Check(cudnnStatus_t rc, std::string_view what) const {
    if (rc == CUDNN_STATUS_SUCCESS) return Status::Ok();
    return common::Internal("{} failed: {}{}", what, error_string(rc), Detail());
  }
};

namespace {

using Dims = std::array<int64_t, 4>;

// One backend descriptor, destroyed with its owner.
class Descriptor {
 public:
  Descriptor(const CudnnAttention::Api& api, cudnnBackendDescriptor_t d) : api_(&api), d_(d) {}
  Descriptor(Descriptor&& other) noexcept : api_(other.api_), d_(std::exchange(other.d_, nullptr)) {}
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  Descriptor& operator=(Descriptor&&) = delete;
  ~Descriptor() {
    if (d_ != nullptr) api_->destroy_descriptor(d_);
  }
  cudnnBackendDescriptor_t get() const { return d_; }

 private:
  const CudnnAttention::Api* api_;
  cudnnBackendDescriptor_t d_;
};

struct Tensor {
  int64_t uid = 0;
  cudnnBackendDescriptor_t desc = nullptr;
  Dims dims{};
};

Dims Packed(const Dims& dims) { return {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1}; }

// An operation graph under construction. The first failure is kept and makes every later call a no-op, so a
// graph reads as its formula; Finish says whether it all held.
class Graph {
 public:
  explicit Graph(const CudnnAttention::Api& api) : api_(api) {}

  // A tensor the variant pack supplies.
  Tensor Input(int64_t uid, const Dims& dims, const Dims& strides, cudnnDataType_t type) {
    return MakeTensor(uid, dims, strides, type, false, false);
  }
  // A scalar passed by value from the host.
  Tensor Scalar(int64_t uid, float value) {
    scalars_.push_back({uid, value});
    return MakeTensor(uid, {1, 1, 1, 1}, {1, 1, 1, 1}, CUDNN_DATA_FLOAT, false, true);
  }
  Tensor Virtual(const Dims& dims, cudnnDataType_t type = CUDNN_DATA_FLOAT) { return View(dims, Packed(dims), type); }
  Tensor View(const Dims& dims, const Dims& strides, cudnnDataType_t type) {
    return MakeTensor(next_virtual_uid_++, dims, strides, type, true, false);
  }

  Tensor Matmul(const Tensor& a, const Tensor& b, const Tensor& c) {
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t desc = Make(CUDNN_BACKEND_MATMUL_DESCRIPTOR, "matmul");
    Set(desc, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
    Finalize(desc, "matmul");
    cudnnBackendDescriptor_t op = Make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "matmul operation");
    SetDescriptor(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, a.desc);
    SetDescriptor(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, b.desc);
    SetDescriptor(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, c.desc);
    SetDescriptor(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, desc);
    AddOperation(op, "matmul operation");
    return c;
  }

  // y = mode(x[, b[, t]]); GEN_INDEX numbers `axis`.
  Tensor Pointwise(cudnnPointwiseMode_t mode, const Tensor& x, const Tensor* b, const Tensor* t, const Tensor& y,
                   int64_t axis = -1) {
    const cudnnDataType_t precision = mode == CUDNN_POINTWISE_GEN_INDEX ? CUDNN_DATA_INT32
                                      : mode == CUDNN_POINTWISE_CMP_GE  ? CUDNN_DATA_BOOLEAN
                                                                        : CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t desc = Make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "pointwise");
    Set(desc, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    Set(desc, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &precision);
    if (axis >= 0) Set(desc, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
    Finalize(desc, "pointwise");
    cudnnBackendDescriptor_t op = Make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, "pointwise operation");
    SetDescriptor(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, desc);
    SetDescriptor(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x.desc);
    if (b != nullptr) SetDescriptor(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b->desc);
    if (t != nullptr) SetDescriptor(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t->desc);
    SetDescriptor(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y.desc);
    AddOperation(op, "pointwise operation");
    return y;
  }
  Tensor Unary(cudnnPointwiseMode_t mode, const Tensor& x, const Tensor& y) {
    return Pointwise(mode, x, nullptr, nullptr, y);
  }
  Tensor Binary(cudnnPointwiseMode_t mode, const Tensor& x, const Tensor& b, const Tensor& y) {
    return Pointwise(mode, x, &b, nullptr, y);
  }

  // y = the sum or maximum of x over the dimensions where y has 1.
  Tensor Reduction(cudnnReduceTensorOp_t op_kind, const Tensor& x, const Tensor& y) {
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t desc = Make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "reduction");
    Set(desc, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &op_kind);
    Set(desc, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
    Finalize(desc, "reduction");
    cudnnBackendDescriptor_t op = Make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, "reduction operation");
    SetDescriptor(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x.desc);
    SetDescriptor(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y.desc);
    SetDescriptor(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, desc);
    AddOperation(op, "reduction operation");
    return y;
  }

  // y: x's elements seen through y's dimensions and strides (the transposes).
  Tensor Reshape(const Tensor& x, const Tensor& y) {
    cudnnBackendDescriptor_t op = Make(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, "reshape operation");
    SetDescriptor(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x.desc);
    SetDescriptor(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y.desc);
    AddOperation(op, "reshape operation");
    return y;
  }

  // s where the key is not after the query (row index >= column index), else the lowest float.
  Tensor Causal(const Tensor& s, const Tensor& lowest) {
    const Tensor row = Pointwise(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, nullptr, Virtual(s.dims, CUDNN_DATA_INT32), 2);
    const Tensor col = Pointwise(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, nullptr, Virtual(s.dims, CUDNN_DATA_INT32), 3);
    const Tensor keep = Binary(CUDNN_POINTWISE_CMP_GE, row, col, Virtual(s.dims, CUDNN_DATA_BOOLEAN));
    return Pointwise(CUDNN_POINTWISE_BINARY_SELECT, s, &lowest, &keep, Virtual(s.dims));
  }

  // The operation graph of everything added, finalized (with `handle` when there is one).
  StatusOr<cudnnBackendDescriptor_t> Finish(cudnnHandle_t handle) {
    cudnnBackendDescriptor_t graph = Make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
    if (handle != nullptr) Set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    Set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(operations_.size()),
        operations_.data());
    if (!status_.ok()) return status_;
    SRUNWAY_RETURN_IF_ERROR(api_.Check(api_.finalize(graph), fmt::format("finalizing the operation graph of {} "
                                                                         "operations",
                                                                         operations_.size())));
    return graph;
  }

  // The by-value scalars, for the variant pack: uid and a pointer that lives as long as the graph.
  std::vector<std::pair<int64_t, void*>> scalars() {
    std::vector<std::pair<int64_t, void*>> out;
    for (auto& [uid, value] : scalars_) out.emplace_back(uid, &value);
    return out;
  }

 private:
  Tensor MakeTensor(int64_t uid, const Dims& dims, const Dims& strides, cudnnDataType_t type, bool is_virtual,
                    bool by_value) {
    const int64_t alignment = 16;
    cudnnBackendDescriptor_t desc = Make(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor");
    Set(desc, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    Set(desc, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
    Set(desc, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data());
    Set(desc, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data());
    Set(desc, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
    Set(desc, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
    if (by_value) Set(desc, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value);
    Finalize(desc, "tensor");
    return {uid, desc, dims};
  }

  cudnnBackendDescriptor_t Make(cudnnBackendDescriptorType_t type, const char* what) {
    if (!status_.ok()) return nullptr;
    cudnnBackendDescriptor_t d = nullptr;
    status_ = api_.Check(api_.create_descriptor(type, &d), fmt::format("creating a cuDNN {} descriptor", what));
    if (!status_.ok()) return nullptr;
    descriptors_.emplace_back(api_, d);
    return d;
  }
  void Set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
           int64_t count, const void* value) {
    if (!status_.ok()) return;
    status_ = api_.Check(api_.set_attribute(d, name, type, count, value),
                         fmt::format("setting cuDNN attribute {}", static_cast<int>(name)));
  }
  void SetDescriptor(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendDescriptor_t value) {
    Set(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value);
  }
  void Finalize(cudnnBackendDescriptor_t d, const char* what) {
    if (!status_.ok()) return;
    status_ = api_.Check(api_.finalize(d), fmt::format("finalizing the {} descriptor (operation {} of the graph)", what,
                                                       operations_.size() + 1));
  }
  void AddOperation(cudnnBackendDescriptor_t op, const char* what) {
    Finalize(op, what);
    if (status_.ok()) operations_.push_back(op);
  }

  const CudnnAttention::Api& api_;
  Status status_ = Status::Ok();
  std::deque<Descriptor> descriptors_;                // every descriptor made
  std::vector<cudnnBackendDescriptor_t> operations_;  // the operations among them, in order
  std::deque<std::pair<int64_t, float>> scalars_;
  int64_t next_virtual_uid_ = 1000;
};

// The variant pack's names for the tensors the caller, the workspace and the host supply.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV, kDQAccum, kSoftmaxSum, kScale, kOne, kLowest };

// attention.cu's tensors as cuDNN sees them: q, k and v heads are strided views of the qkv rows, K^T and V^T the
// same with the last two strides swapped.
struct Layout {
  explicit Layout(const AttentionShape& s) {
    const int64_t B = s.B, T = s.T, H = s.H, KV = s.KV, hd = s.hd, row = (H + 2 * KV) * hd;
    q = {B, H, T, hd};
    kv = {B, KV, T, hd};
    kv_t = {B, KV, hd, T};
    scores = {B, H, T, T};
    per_query = {B, H, T, 1};
    rows = {T * row, hd, row, 1};
    rows_t = {T * row, hd, 1, row};
    out = {T * H * hd, hd, H * hd, 1};
    scores_t = {H * T * T, T * T, 1, T};
  }
  Dims q, kv, kv_t, scores, per_query;  // dimensions
  Dims rows, rows_t, out, scores_t;     // strides
};

// What both directions read: q, K^T, the output, the statistics, the scale and the masked scores' value.
struct Shared {
  Tensor q, k_t, o, stats, scale, lowest;
};

Shared SharedInputs(Graph& g, const Layout& l, const AttentionShape& shape) {
  return {g.Input(kQ, l.q, l.rows, CUDNN_DATA_BFLOAT16),
          g.Input(kK, l.kv_t, l.rows_t, CUDNN_DATA_BFLOAT16),
          g.Input(kO, l.q, l.out, CUDNN_DATA_BFLOAT16),
          g.Input(kStats, l.per_query, Packed(l.per_query), CUDNN_DATA_FLOAT),
          g.Scalar(kScale, 1.0f / std::sqrt(static_cast<float>(shape.hd))),
          g.Scalar(kLowest, std::numeric_limits<float>::lowest())};
}

// causal(scale Q K^T), the scores both directions start from.
Tensor CausalScores(Graph& g, const Layout& l, const Shared& in) {
  const Tensor s = g.Matmul(in.q, in.k_t, g.Virtual(l.scores));
  return g.Causal(g.Binary(CUDNN_POINTWISE_MUL, s, in.scale, g.Virtual(l.scores)), in.lowest);
}

Tensor BuildForward(Graph& g, const AttentionShape& shape) {
  const Layout l(shape);
  const Shared in = SharedInputs(g, l, shape);
  const Tensor v = g.Input(kV, l.kv, l.rows, CUDNN_DATA_BFLOAT16);

  const Tensor s = CausalScores(g, l, in);
  const Tensor max = g.Reduction(CUDNN_REDUCE_TENSOR_MAX, s, g.Virtual(l.per_query));
  const Tensor shifted = g.Binary(CUDNN_POINTWISE_SUB, s, max, g.Virtual(l.scores));
  const Tensor e = g.Unary(CUDNN_POINTWISE_EXP, shifted, g.Virtual(l.scores));
  const Tensor sum = g.Reduction(CUDNN_REDUCE_TENSOR_ADD, e, g.Virtual(l.per_query));
  const Tensor log_sum = g.Unary(CUDNN_POINTWISE_LOG, sum, g.Virtual(l.per_query));
  g.Binary(CUDNN_POINTWISE_ADD, max, log_sum, in.stats);
  const Tensor p = g.Binary(CUDNN_POINTWISE_DIV, e, sum, g.Virtual(l.scores, CUDNN_DATA_BFLOAT16));
  return g.Matmul(p, v, in.o);
}

// out (per K/V head) = a b, summed over each group of query heads that shares a K/V head.
Tensor GroupProduct(Graph& g, const Layout& l, const Tensor& a, const Tensor& b, const Tensor& out) {
  if (l.q[1] == l.kv[1]) return g.Matmul(a, b, out);
  const Tensor per_query_head = g.Matmul(a, b, g.Virtual(l.q, CUDNN_DATA_BFLOAT16));
  return g.Reduction(CUDNN_REDUCE_TENSOR_ADD, per_query_head, out);
}

Tensor BuildBackward(Graph& g, const AttentionShape& shape) {
  const Layout l(shape);
  const Shared in = SharedInputs(g, l, shape);
  const Tensor v_t = g.Input(kV, l.kv_t, l.rows_t, CUDNN_DATA_BFLOAT16);
  const Tensor d_o = g.Input(kDO, l.q, l.out, CUDNN_DATA_BFLOAT16);
  const Tensor dq = g.Input(kDQ, l.q, l.rows, CUDNN_DATA_BFLOAT16);
  const Tensor dk = g.Input(kDK, l.kv, l.rows, CUDNN_DATA_BFLOAT16);
  const Tensor dv = g.Input(kDV, l.kv, l.rows, CUDNN_DATA_BFLOAT16);
  const Tensor softmax_sum = g.Input(kSoftmaxSum, l.per_query, Packed(l.per_query), CUDNN_DATA_FLOAT);
  const Tensor dq_accum = g.Input(kDQAccum, l.q, Packed(l.q), CUDNN_DATA_FLOAT);
  const Tensor one = g.Scalar(kOne, 1.0f);

  // D = rowsum(dO o O), kept in the workspace for every key tile.
  const Tensor d_o_o = g.Binary(CUDNN_POINTWISE_MUL, d_o, in.o, g.Virtual(l.q));
  const Tensor d = g.Reduction(CUDNN_REDUCE_TENSOR_ADD, d_o_o, g.Virtual(l.per_query));
  g.Binary(CUDNN_POINTWISE_MUL, d, one, softmax_sum);

  // E = exp(causal(scale Q K^T) - stats): the forward's probabilities.
  const Tensor s = CausalScores(g, l, in);
  const Tensor shifted = g.Binary(CUDNN_POINTWISE_SUB, s, in.stats, g.Virtual(l.scores));
  const Tensor e = g.Unary(CUDNN_POINTWISE_EXP, shifted, g.Virtual(l.scores));

  // dV = E^T dO
  const Tensor e_t = g.Reshape(e, g.View(l.scores, l.scores_t, CUDNN_DATA_BFLOAT16));
  GroupProduct(g, l, e_t, d_o, dv);

  // dS = (dO V^T - D) o E o scale; dK = dS^T Q; dQ = dS K
  Tensor ds = g.Matmul(d_o, v_t, g.Virtual(l.scores));
  ds = g.Binary(CUDNN_POINTWISE_SUB, ds, softmax_sum, g.Virtual(l.scores));
  ds = g.Binary(CUDNN_POINTWISE_MUL, ds, e, g.Virtual(l.scores));
  ds = g.Binary(CUDNN_POINTWISE_MUL, ds, in.scale, g.Virtual(l.scores));
  const Tensor ds_t = g.Reshape(ds, g.View(l.scores, l.scores_t, CUDNN_DATA_BFLOAT16));
  GroupProduct(g, l, ds_t, in.q, dk);
  const Tensor k = g.Reshape(in.k_t, g.View(l.kv, l.rows, CUDNN_DATA_BFLOAT16));
  g.Matmul(ds, k, dq_accum);
  return g.Unary(CUDNN_POINTWISE_IDENTITY, dq_accum, dq);
}

std::string Describe(bool backward, const AttentionShape& s) {
  return fmt::format("causal attention {} at B {} T {} H {} KV {} hd {}", backward ? "backward" : "forward", s.B, s.T,
                     s.H, s.KV, s.hd);
}

int64_t AlignUp(int64_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

// A graph, the engine cuDNN chose for it, and where the backward's fp32 scratch lies in the workspace.
struct CudnnAttention::Plan {
  explicit Plan(const Api& api) : graph(api) {}
  Graph graph;
  std::deque<Descriptor> engine;  // heuristics, configurations, the plan
  cudnnBackendDescriptor_t plan = nullptr;
  int64_t workspace_bytes = 0;
  int64_t dq_accum_at = -1, dq_accum_bytes = 0, softmax_sum_at = -1;
};

namespace {

// A new descriptor of `type`, kept in `owned`.
StatusOr<cudnnBackendDescriptor_t> Own(const CudnnAttention::Api& api, std::deque<Descriptor>& owned,
                                       cudnnBackendDescriptorType_t type, std::string_view what) {
  cudnnBackendDescriptor_t d = nullptr;
  SRUNWAY_RETURN_IF_ERROR(api.Check(api.create_descriptor(type, &d), fmt::format("creating {}", what)));
  owned.emplace_back(api, d);
  return d;
}

struct Offered {
  std::vector<cudnnBackendDescriptor_t> configs;
  std::string why_none;  // cuDNN's account, when it offers none
};

// The engine configurations cuDNN's heuristics (mode A) offer for `graph` on the handle's GPU, or on the one that
// `device` (a device-property descriptor) describes: those that pass each engine's checks, which include the
// run-time compiler's needs (the CUDA driver).
StatusOr<Offered> OfferedEngines(const CudnnAttention::Api& api, std::deque<Descriptor>& owned,
                                 cudnnBackendDescriptor_t graph, cudnnBackendDescriptor_t device) {
  SRUNWAY_ASSIGN_OR_RETURN(cudnnBackendDescriptor_t heuristics,
                           Own(api, owned, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "cuDNN's engine heuristics"));
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  SRUNWAY_RETURN_IF_ERROR(api.Check(
      api.set_attribute(heuristics, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph),
      "setting the heuristics' graph"));
  SRUNWAY_RETURN_IF_ERROR(
      api.Check(api.set_attribute(heuristics, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode),
                "setting the heuristics' mode"));
  if (device != nullptr) {
    SRUNWAY_RETURN_IF_ERROR(api.Check(
        api.set_attribute(heuristics, CUDNN_ATTR_ENGINEHEUR_DEVICEPROP, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &device),
        "setting the heuristics' device"));
  }
  Offered offered;
  if (cudnnStatus_t rc = api.finalize(heuristics); rc != CUDNN_STATUS_SUCCESS) {
    offered.why_none = fmt::format("heuristics: {}{}", api.error_string(rc), api.Detail());
    return offered;
  }
  int64_t count = 0;
  SRUNWAY_RETURN_IF_ERROR(api.Check(
      api.get_attribute(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
      "counting the heuristics' engines"));
  std::vector<cudnnBackendDescriptor_t> configs;
  for (int64_t i = 0; i < count; ++i) {
    SRUNWAY_ASSIGN_OR_RETURN(configs.emplace_back(),
                             Own(api, owned, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "an engine configuration"));
  }
  int64_t returned = 0;
  if (count > 0) {
    SRUNWAY_RETURN_IF_ERROR(
        api.Check(api.get_attribute(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                    &returned, configs.data()),
                  "reading the heuristics' engines"));
  }
  configs.resize(static_cast<size_t>(returned));
  offered.configs = std::move(configs);
  if (offered.configs.empty()) {
    std::string why = api.LastError();
    std::replace(why.begin(), why.end(), '\n', ' ');
    offered.why_none = fmt::format("{} considered, none usable: {}", count, why);
  }
  return offered;
}

// Builds `backward`'s graph of `shape` and the first execution plan that cuDNN's heuristics offer and can make.
StatusOr<std::unique_ptr<CudnnAttention::Plan>> MakePlan(const CudnnAttention::Api& api, bool backward,
                                                         const AttentionShape& shape) {
  auto plan = std::make_unique<CudnnAttention::Plan>(api);
  backward ? BuildBackward(plan->graph, shape) : BuildForward(plan->graph, shape);
  SRUNWAY_ASSIGN_OR_RETURN(cudnnBackendDescriptor_t graph, plan->graph.Finish(api.handle));
  SRUNWAY_ASSIGN_OR_RETURN(Offered offered, OfferedEngines(api, plan->engine, graph, nullptr));
  if (offered.configs.empty()) {
    return common::NotFound("cuDNN {} has no engine for {}: {}", api.get_version(), Describe(backward, shape),
                            offered.why_none);
  }
  std::string refusals;
  for (size_t i = 0; i < offered.configs.size() && plan->plan == nullptr; ++i) {
    SRUNWAY_ASSIGN_OR_RETURN(cudnnBackendDescriptor_t candidate,
                             Own(api, plan->engine, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "an execution plan"));
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    const cudnnBackendAttributeName_t handle_attribute = CUDNN_ATTR_EXECUTION_PLAN_HANDLE;
#pragma GCC diagnostic pop
    cudnnStatus_t rc = api.set_attribute(candidate, handle_attribute, CUDNN_TYPE_HANDLE, 1, &api.handle);
    if (rc == CUDNN_STATUS_SUCCESS) {
      rc = api.set_attribute(candidate, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                             &offered.configs[i]);
    }
    if (rc == CUDNN_STATUS_SUCCESS) rc = api.finalize(candidate);
    if (rc != CUDNN_STATUS_SUCCESS) {
      refusals += fmt::format("{}engine {}: {}{}", refusals.empty() ? "" : "; ", i, api.error_string(rc), api.Detail());
      continue;
    }
    plan->plan = candidate;
  }
  if (plan->plan == nullptr) {
    return common::NotFound("cuDNN {} has no engine for {} ({} offered{}{})", api.get_version(),
                            Describe(backward, shape), offered.configs.size(), refusals.empty() ? "" : ": ", refusals);
  }
  int64_t engine_workspace = 0, got = 0;
  SRUNWAY_RETURN_IF_ERROR(api.Check(api.get_attribute(plan->plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                                      CUDNN_TYPE_INT64, 1, &got, &engine_workspace),
                                    "reading the plan's workspace size"));
  plan->workspace_bytes = AlignUp(engine_workspace);
  if (backward) {
    const Layout l(shape);
    plan->dq_accum_at = plan->workspace_bytes;
    plan->dq_accum_bytes = l.q[0] * l.q[1] * l.q[2] * l.q[3] * int64_t{sizeof(float)};
    plan->softmax_sum_at = plan->dq_accum_at + AlignUp(plan->dq_accum_bytes);
    plan->workspace_bytes = plan->softmax_sum_at + AlignUp(l.q[0] * l.q[1] * l.q[2] * int64_t{sizeof(float)});
  }
  return plan;
}

// `library` if named, else the site's cuDNN. cuDNN and its parts stay loaded once opened: its loader (in
// libcudnn_graph, which never unloads) keeps cuBLASLt's functions, and once cuDNN was closed and opened again it
// called into the unloaded cuBLASLt (cudnn_graph's H100 check crashed in 4 of 10 runs).
StatusOr<common::DynamicLibrary> OpenCudnn(const std::string& library) {
  auto lib = library.empty() ? common::OpenSiteLibrary({"SRUNWAY_CUDNN_LIBRARY", {"libcudnn.so.9", "libcudnn.so"}})
                             : common::DynamicLibrary::Open(library);
  if (lib.ok()) lib->KeepLoaded();
  return lib;
}

// Loads, for good, what libcudnn.so.9 opens by soname when it builds a plan, from where cuDNN was found (a wheel's
// folder is on no search path), and NVRTC, which its runtime-compiled engines need. Best effort: what cannot be
// loaded here, cuDNN names itself when it needs it.
void LoadCompanions(const std::string& cudnn_path) {
  const std::filesystem::path folder = std::filesystem::path(cudnn_path).parent_path();
  for (const char* name : {"libcudnn_graph.so.9", "libcudnn_heuristic.so.9", "libcudnn_engines_precompiled.so.9",
                           "libcudnn_engines_runtime_compiled.so.9"}) {
    std::error_code error;
    if (!std::filesystem::exists(folder / name, error)) continue;
    if (auto lib = common::DynamicLibrary::Open((folder / name).string()); lib.ok()) lib->KeepLoaded();
  }
  if (auto nvrtc = common::OpenSiteLibrary({"SRUNWAY_NVRTC_LIBRARY", {"libnvrtc.so.13", "libnvrtc.so.12"}});
      nvrtc.ok()) {
    nvrtc->KeepLoaded();
  }
}

bool Aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

StatusOr<std::unique_ptr<CudnnAttention>> CudnnAttention::Open(Device& device) {
  if (device.kind() != DeviceKind::kCuda) return common::InvalidArgument("cuDNN needs a GPU, not {}", device.name());
  SRUNWAY_ASSIGN_OR_RETURN(auto lib, OpenCudnn(""));
  LoadCompanions(lib.path());
  SRUNWAY_ASSIGN_OR_RETURN(auto api, Api::Load(std::move(lib)));
  SRUNWAY_RETURN_IF_ERROR(api->Check(api->create(&api->handle), fmt::format("cudnnCreate ({})", api->lib.path())));
  return std::unique_ptr<CudnnAttention>(new CudnnAttention(std::move(api), device));
}

CudnnAttention::CudnnAttention(std::unique_ptr<Api> api, Device& device) : api_(std::move(api)), device_(device) {}

CudnnAttention::~CudnnAttention() {
  plans_.clear();  // their descriptors before the handle
  api_->destroy(api_->handle);
}

const std::string& CudnnAttention::library_path() const { return api_->lib.path(); }

size_t CudnnAttention::version() const { return api_->get_version(); }

namespace {

// Tells once that the kernels take a shape from now on, and why (`kept`: NotFound with cuDNN's reason).
void WarnKernelsRunIt(const Status& kept) {
  common::LogWarn("{}; srunway's attention kernels run it instead", kept.message());
}

}  // namespace

StatusOr<CudnnAttention::Plan*> CudnnAttention::PlanFor(bool backward, const AttentionShape& shape) {
  const auto key = std::make_tuple(backward, shape);
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    it = plans_.emplace(key, MakePlan(*api_, backward, shape)).first;
    if (const Status failed = it->second.status(); !failed.ok()) {
      // A graph this cuDNN will not build is, like a shape without an engine, one for the kernels.
      if (failed.code() != common::StatusCode::kNotFound) {
        it->second = common::NotFound("cuDNN {} could not plan {}: {}", api_->get_version(), Describe(backward, shape),
                                      failed.message());
      }
      WarnKernelsRunIt(it->second.status());
    }
  }
  if (!it->second.ok()) return it->second.status();
  return it->second->get();
}

Status CudnnAttention::Run(bool backward, const AttentionShape& shape, const std::map<int64_t, void*>& tensors,
                           trainer::Stream& stream) {
  SRUNWAY_ASSIGN_OR_RETURN(Plan * plan, PlanFor(backward, shape));
  const Status ran = Execute(*plan, tensors, stream);
  if (ran.ok()) return ran;
  // A plan cuDNN made but cannot run (its run-time compiled kernel, say): the kernels take the shape from now on.
  auto& kept = plans_.at(std::make_tuple(backward, shape));
  kept = common::NotFound("cuDNN {} failed to run {}: {}", api_->get_version(), Describe(backward, shape),
                          ran.message());
  WarnKernelsRunIt(kept.status());
  return kept.status();
}

Status CudnnAttention::Execute(Plan& plan, const std::map<int64_t, void*>& tensors, trainer::Stream& stream) {
  SRUNWAY_RETURN_IF_ERROR(
      Grow(workspace_, device_, DType::kFloat32, static_cast<size_t>(plan.workspace_bytes) / sizeof(float), stream));
  std::map<int64_t, void*> pointers = tensors;
  auto* workspace = static_cast<char*>(workspace_.data());
  if (plan.dq_accum_at >= 0) {
    pointers[kDQAccum] = workspace + plan.dq_accum_at;
    pointers[kSoftmaxSum] = workspace + plan.softmax_sum_at;
    SRUNWAY_RETURN_IF_ERROR(device_.Zero(pointers[kDQAccum], static_cast<size_t>(plan.dq_accum_bytes), stream));
  }
  for (const auto& [uid, value] : plan.graph.scalars()) pointers[uid] = value;
  std::vector<int64_t> uids;
  std::vector<void*> data;
  for (const auto& [uid, pointer] : pointers) {
    uids.push_back(uid);
    data.push_back(pointer);
  }
  const Api& api = *api_;
  cudnnBackendDescriptor_t pack = nullptr;
  SRUNWAY_RETURN_IF_ERROR(
      api.Check(api.create_descriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack), "creating a cuDNN variant pack"));
  const Descriptor owned(api, pack);
  const auto n = static_cast<int64_t>(uids.size());
  SRUNWAY_RETURN_IF_ERROR(
      api.Check(api.set_attribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids.data()),
                "setting the variant pack's tensor ids"));
  SRUNWAY_RETURN_IF_ERROR(
      api.Check(api.set_attribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, data.data()),
                "setting the variant pack's pointers"));
  SRUNWAY_RETURN_IF_ERROR(
      api.Check(api.set_attribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace),
                "setting the variant pack's workspace"));
  SRUNWAY_RETURN_IF_ERROR(api.Check(api.finalize(pack), "finalizing the variant pack"));
  SRUNWAY_RETURN_IF_ERROR(
      api.Check(api.set_stream(api.handle, static_cast<cudaStream_t>(device_.native(stream))), "cudnnSetStream"));
  return api.Check(api.execute(api.handle, plan.plan, pack), "cudnnBackendExecute");
}

Status CudnnAttention::Forward(void* out, float* lse, const void* qkv, const AttentionShape& s,
                               trainer::Stream& stream) {
  const auto* rows = static_cast<const uint16_t*>(qkv);
  const void* k = rows + int64_t{s.H} * s.hd;
  const void* v = rows + int64_t{s.H + s.KV} * s.hd;
  if (!Aligned(qkv) || !Aligned(k) || !Aligned(v) || !Aligned(out)) {
    return common::NotFound("cuDNN's attention needs 16-byte aligned q, k, v and out heads");
  }
  return Run(
      false, s,
      {{kQ, const_cast<void*>(qkv)}, {kK, const_cast<void*>(k)}, {kV, const_cast<void*>(v)}, {kO, out}, {kStats, lse}},
      stream);
}

Status CudnnAttention::Backward(void* dqkv, const void* dout, const void* out, const void* qkv, const float* lse,
                                const AttentionShape& s, trainer::Stream& stream) {
  const int64_t k_at = int64_t{s.H} * s.hd, v_at = int64_t{s.H + s.KV} * s.hd;
  auto* rows = static_cast<uint16_t*>(const_cast<void*>(qkv));
  auto* grads = static_cast<uint16_t*>(dqkv);
  for (const void* p : std::initializer_list<const void*>{rows + k_at, rows + v_at, qkv, dqkv, dout, out}) {
    if (!Aligned(p)) return common::NotFound("cuDNN's attention needs 16-byte aligned tensors and heads");
  }
  const std::map<int64_t, void*> tensors = {{kQ, rows},
                                            {kK, rows + k_at},
                                            {kV, rows + v_at},
                                            {kO, const_cast<void*>(out)},
                                            {kDO, const_cast<void*>(dout)},
                                            {kStats, const_cast<float*>(lse)},
                                            {kDQ, grads},
                                            {kDK, grads + k_at},
                                            {kDV, grads + v_at}};
  return Run(true, s, tensors, stream);
}

namespace {

// The cuDNN that `library` names, with no handle (no GPU needed).
StatusOr<std::unique_ptr<CudnnAttention::Api>> LoadWithoutGpu(const std::string& library) {
  SRUNWAY_ASSIGN_OR_RETURN(auto lib, OpenCudnn(library));
  LoadCompanions(lib.path());
  SRUNWAY_ASSIGN_OR_RETURN(auto api, CudnnAttention::Api::Load(std::move(lib)));
  return api;
}

// Whether cuDNN's account of why it offered no engine starts with an engine whose only want is what a GPU node
// has: its run-time compiler needs the CUDA driver. An engine that does not recognise the graph says
// CUDNN_STATUS_NOT_SUPPORTED first (its pattern match runs before it looks for a driver).
bool WantsOnlyADriver(const std::string& why) {
  const size_t first = why.find("Warning: ");
  return first != std::string::npos &&
         why.compare(first + 9, 55, "CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING") == 0;
}

// Builds and finalizes both directions' graphs of `shape` with the cuDNN that `library` names, handing each to
// `check` with what it is ("causal attention forward of ... with PATH").
Status CheckBoth(const std::string& library, const AttentionShape& shape,
                 const std::function<Status(const CudnnAttention::Api&, cudnnBackendDescriptor_t graph,
                                            const std::string& what)>& check) {
  SRUNWAY_ASSIGN_OR_RETURN(auto api, LoadWithoutGpu(library));
  for (bool backward : {false, true}) {
    Graph graph(*api);
    backward ? BuildBackward(graph, shape) : BuildForward(graph, shape);
    const std::string what = fmt::format("{} with {}", Describe(backward, shape), api->lib.path());
    auto built = graph.Finish(nullptr);
    if (!built.ok()) return built.status().WithContext(what);
    SRUNWAY_RETURN_IF_ERROR(check(*api, *built, what));
  }
  return Status::Ok();
}

}  // namespace

Status CudnnAttention::CheckGraphs(const std::string& library, const AttentionShape& shape) {
  return CheckBoth(library, shape,
                   [](const Api&, cudnnBackendDescriptor_t, const std::string&) { return Status::Ok(); });
}

Status CudnnAttention::CheckEngines(const std::string& library, const AttentionShape& shape,
                                    const std::string& device_json) {
  return CheckBoth(library, shape, [&](const Api& api, cudnnBackendDescriptor_t graph, const std::string& what) {
    std::deque<Descriptor> owned;
    SRUNWAY_ASSIGN_OR_RETURN(cudnnBackendDescriptor_t device,
                             Own(api, owned, CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, "a device-property descriptor"));
    SRUNWAY_RETURN_IF_ERROR(
        api.Check(api.set_attribute(device, CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR,
                                    static_cast<int64_t>(device_json.size()), device_json.data()),
                  "setting the device properties"));
    SRUNWAY_RETURN_IF_ERROR(api.Check(api.finalize(device), "reading the device properties"));
    SRUNWAY_ASSIGN_OR_RETURN(Offered offered, OfferedEngines(api, owned, graph, device));
    if (offered.configs.empty() && !WantsOnlyADriver(offered.why_none)) {
      return common::NotFound("cuDNN {} has no engine for {}: {}", api.get_version(), what, offered.why_none);
    }
    return Status::Ok();
  });
}

StatusOr<std::string> CudnnAttention::DeviceJson() const {
  const Api& api = *api_;
  std::deque<Descriptor> owned;
  SRUNWAY_ASSIGN_OR_RETURN(cudnnBackendDescriptor_t device,
                           Own(api, owned, CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, "a device-property descriptor"));
  SRUNWAY_RETURN_IF_ERROR(
      api.Check(api.set_attribute(device, CUDNN_ATTR_DEVICEPROP_HANDLE, CUDNN_TYPE_HANDLE, 1, &api.handle),
                "setting the device-property handle"));
  SRUNWAY_RETURN_IF_ERROR(api.Check(api.finalize(device), "reading this GPU's properties"));
  int64_t size = 0;
  SRUNWAY_RETURN_IF_ERROR(api.Check(
      api.get_attribute(device, CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, 0, &size, nullptr),
      "sizing the device properties"));
  std::string json(static_cast<size_t>(size), '\0');
  SRUNWAY_RETURN_IF_ERROR(api.Check(
      api.get_attribute(device, CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, size, &size, json.data()),
      "serializing the device properties"));
  json.resize(static_cast<size_t>(size));
  while (!json.empty() && json.back() == '\0') json.pop_back();
  return json;
}

}  // namespace srunway::trainer::cuda
