// A stand-in for cuDNN (built as libcudnn.so.9) for the emulated GPU, whose "device memory" is host memory. By
// default it has no engine for any graph, as a cuDNN without one for a shape behaves: cudnnCreate and every
// descriptor call succeed, the heuristics offer nothing and say why through cudnnGetLastErrorString, and executing
// is an error. With FAKE_CUDNN_ENGINE=host it offers one engine, which executes the operation graph on the host
// as the backend API defines its operations, one at a time (matmul, pointwise, reduction, reshape), so that what
// cudnn_attention.cc builds is checked for what it computes, not only for whether cuDNN accepts it;
// FAKE_CUDNN_ENGINE=broken offers an engine whose every execution fails (EXECUTION_FAILED). With
// FAKE_CUDNN_BAD_GRAPH=1 it refuses to finalize any operation graph (CUDNN_STATUS_BAD_PARAM), as a cuDNN too old
// for one of the graph's operations does. It counts the descriptors made and destroyed, and with
// FAKE_CUDNN_REPORT=1 prints at exit how many were never destroyed.
//
// The host engine's reading of the API, which only a real cuDNN can confirm: a reshape's output is its input's
// memory seen through the output's dimensions and strides (how a transpose is written); a dimension of size 1
// broadcasts, and a batch dimension of size n against N (a divisor) maps index i to i * n / N, in matmuls and in
// reductions alike (query heads h share K/V head h / (H / KV)); BINARY_SELECT's y is x where t holds, else b;
// GEN_INDEX gives each element its index along the pointwise descriptor's axis; a bf16 tensor holds bf16 values.
#include <cudnn_graph.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/half.h"

namespace {

std::atomic<long> g_live{0};

struct Descriptor {
  cudnnBackendDescriptorType_t type;
  std::map<cudnnBackendAttributeName_t, std::vector<char>> attributes;  // each value's bytes as they were set
  cudnnBackendDescriptor_t graph = nullptr;                             // an engine configuration's

  template <typename T>
  std::vector<T> Get(cudnnBackendAttributeName_t name) const {
    auto it = attributes.find(name);
    if (it == attributes.end()) return {};
    std::vector<T> values(it->second.size() / sizeof(T));
    std::memcpy(values.data(), it->second.data(), values.size() * sizeof(T));
    return values;
  }
  template <typename T>
  T One(cudnnBackendAttributeName_t name, T otherwise = T{}) const {
    const std::vector<T> values = Get<T>(name);
    return values.empty() ? otherwise : values[0];
  }
};

Descriptor* D(cudnnBackendDescriptor_t d) { return reinterpret_cast<Descriptor*>(d); }

struct Report {
  ~Report() {
    const char* report = std::getenv("FAKE_CUDNN_REPORT");
    if (report != nullptr && report[0] == '1')
      std::fprintf(stderr, "fake cuDNN: %ld descriptors left\n", g_live.load());
  }
} g_report;

int g_handle = 0;
std::string g_last_error;

bool EnvIs(const char* name, const char* value) {
  const char* set = std::getenv(name);
  return set != nullptr && std::strcmp(set, value) == 0;
}
bool RefusesGraphs() { return EnvIs("FAKE_CUDNN_BAD_GRAPH", "1"); }
bool HasHostEngine() { return EnvIs("FAKE_CUDNN_ENGINE", "host") || EnvIs("FAKE_CUDNN_ENGINE", "broken"); }

size_t ElementSize(cudnnBackendAttributeType_t type) {
  switch (type) {
    case CUDNN_TYPE_BACKEND_DESCRIPTOR:
    case CUDNN_TYPE_HANDLE:
    case CUDNN_TYPE_VOID_PTR:
      return sizeof(void*);
    case CUDNN_TYPE_INT64:
    case CUDNN_TYPE_DOUBLE:
      return 8;
    case CUDNN_TYPE_FLOAT:
      return sizeof(float);
    case CUDNN_TYPE_BOOLEAN:
      return sizeof(bool);
    case CUDNN_TYPE_CHAR:
      return 1;
    default:
      return sizeof(int32_t);  // the enumerations
  }
}

// ---- the host engine ----

using Index = std::array<int64_t, 4>;

// A tensor's elements: memory (the caller's, or the engine's for a virtual tensor, held as floats) seen through
// dimensions and strides.
struct View {
  void* base = nullptr;
  bool float_storage = true;  // else bf16
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  Index dims{}, strides{};

  int64_t Offset(const Index& i) const {
    return i[0] * strides[0] + i[1] * strides[1] + i[2] * strides[2] + i[3] * strides[3];
  }
  float Read(const Index& i) const {
    if (!float_storage) return srunway::common::BFloat16ToFloat(static_cast<const uint16_t*>(base)[Offset(i)]);
    const float value = static_cast<const float*>(base)[Offset(i)];
    return type == CUDNN_DATA_BFLOAT16 ? srunway::common::BFloat16ToFloat(srunway::common::FloatToBFloat16(value))
                                       : value;
  }
  void Write(const Index& i, float value) const {
    if (!float_storage) {
      static_cast<uint16_t*>(base)[Offset(i)] = srunway::common::FloatToBFloat16(value);
    } else {
      static_cast<float*>(base)[Offset(i)] =
          type == CUDNN_DATA_BFLOAT16 ? srunway::common::BFloat16ToFloat(srunway::common::FloatToBFloat16(value))
                                      : value;
    }
  }
  // The element that index `i` of a tensor with `out` dimensions reads here: sizes 1 broadcast, a size n against
  // N takes i * n / N.
  Index From(const Index& i, const Index& out) const {
    Index j{};
    for (int d = 0; d < 4; ++d) j[d] = dims[d] == out[d] ? i[d] : i[d] * dims[d] / out[d];
    return j;
  }
};

template <typename F>
void ForEach(const Index& dims, F&& f) {
  Index i{};
  for (i[0] = 0; i[0] < dims[0]; ++i[0])
    for (i[1] = 0; i[1] < dims[1]; ++i[1])
      for (i[2] = 0; i[2] < dims[2]; ++i[2])
        for (i[3] = 0; i[3] < dims[3]; ++i[3]) f(i);
}

class HostEngine {
 public:
  explicit HostEngine(std::map<int64_t, void*> pointers) : pointers_(std::move(pointers)) {}

  bool Run(const Descriptor& graph) {
    for (cudnnBackendDescriptor_t op : graph.Get<cudnnBackendDescriptor_t>(CUDNN_ATTR_OPERATIONGRAPH_OPS)) {
      if (!Operation(*D(op))) return false;
    }
    return true;
  }

 private:
  bool Fail(const std::string& why) {
    g_last_error = "Error: CUDNN_STATUS_EXECUTION_FAILED; Reason: the host engine: " + why;
    return false;
  }

  Index Dims(const Descriptor& t, cudnnBackendAttributeName_t name) const {
    Index v{};
    const auto values = t.Get<int64_t>(name);
    for (size_t d = 0; d < 4 && d < values.size(); ++d) v[d] = values[d];
    return v;
  }

  // The view of tensor `t`, made when first asked for: the variant pack's memory, or the engine's for a virtual
  // tensor, or (a reshape's output) the memory of `alias`.
  const View* ViewOf(cudnnBackendDescriptor_t desc, const View* alias = nullptr) {
    if (auto it = views_.find(desc); it != views_.end()) return &it->second;
    const Descriptor& t = *D(desc);
    View v;
    v.type = t.One<cudnnDataType_t>(CUDNN_ATTR_TENSOR_DATA_TYPE);
    v.dims = Dims(t, CUDNN_ATTR_TENSOR_DIMENSIONS);
    v.strides = Dims(t, CUDNN_ATTR_TENSOR_STRIDES);
    const int64_t uid = t.One<int64_t>(CUDNN_ATTR_TENSOR_UNIQUE_ID);
    if (alias != nullptr) {
      v.base = alias->base;
      v.float_storage = alias->float_storage;
    } else if (t.One<char>(CUDNN_ATTR_TENSOR_IS_VIRTUAL) != 0) {
      int64_t span = 1;
      for (int d = 0; d < 4; ++d) span += (v.dims[d] - 1) * v.strides[d];
      auto& memory = owned_.emplace_back(std::make_unique<std::vector<float>>(static_cast<size_t>(span)));
      v.base = memory->data();
    } else {
      auto it = pointers_.find(uid);
      if (it == pointers_.end() || it->second == nullptr) {
        Fail("the variant pack has no pointer for tensor " + std::to_string(uid));
        return nullptr;
      }
      v.base = it->second;
      v.float_storage = v.type != CUDNN_DATA_BFLOAT16;
    }
    return &views_.emplace(desc, v).first->second;
  }

  bool Operation(const Descriptor& op) {
    switch (op.type) {
      case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR:
        return Matmul(op);
      case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR:
        return Pointwise(op);
      case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR:
        return Reduction(op);
      case CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR: {
        const View* x = ViewOf(op.One<cudnnBackendDescriptor_t>(CUDNN_ATTR_OPERATION_RESHAPE_XDESC));
        return x != nullptr && ViewOf(op.One<cudnnBackendDescriptor_t>(CUDNN_ATTR_OPERATION_RESHAPE_YDESC), x);
      }
      default:
        return Fail("operation type " + std::to_string(static_cast<int>(op.type)) + " is not one it runs");
    }
  }

  // C[b, h] = A[b, h] B[b, h], each batch index taken as View::From maps it.
  bool Matmul(const Descriptor& op) {
    const View* a = ViewOf(op.One<cudnnBackendDescriptor_t>(CUDNN_ATTR_OPERATION_MATMUL_ADESC));
    const View* b = ViewOf(op.One<cudnnBackendDescriptor_t>(CUDNN_ATTR_OPERATION_MATMUL_BDESC));
    const View* c = ViewOf(op.One<cudnnBackendDescriptor_t>(CUDNN_ATTR_OPERATION_MATMUL_CDESC));
    if (a == nullptr || b == nullptr || c == nullptr) return false;
    const int64_t K = a->dims[3];
    if (b->dims[2] != K || a->dims[2] != c->dims[2] || b->dims[3] != c->dims[3]) return Fail("matmul shapes differ");
    ForEach(c->dims, [&](const Index& i) {
      Index ai = a->From({i[0], i[1], i[2], 0}, c->dims), bi = b->From({i[0], i[1], 0, i[3]}, c->dims);
      ai[2] = i[2];
      bi[3] = i[3];
      float sum = 0;
      for (ai[3] = 0, bi[2] = 0; ai[3] < K; ++ai[3], ++bi[2]) sum += a->Read(ai) * b->Read(bi);
      c->Write(i, sum);
    });
    return true;
  }

  bool Pointwise(const Descriptor& op) {
    const Descriptor& pw = *D(op.One<cudnnBackendDescriptor_t>(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR));
    const auto mode = pw.One<cudnnPointwiseMode_t>(CUDNN_ATTR_POINTWISE_MODE);
    const int64_t axis = pw.One<int64_t>(CUDNN_ATTR_POINTWISE_AXIS, -1);
    const View* x = ViewOf(op.One<cudnnBackendDescriptor_t>(CUDNN_ATTR_OPERATION_POINTWISE_XDESC));
    const View* y = ViewOf(op.One<cudnnBackendDescriptor_t>(CUDNN_ATTR_OPERATION_POINTWISE_YDESC));
    const auto b_desc = op.One<cudnnBackendDescriptor_t>(CUDNN_ATTR_OPERATION_POINTWISE_BDESC);
    const auto t_desc = op.One<cudnnBackendDescriptor_t>(CUDNN_ATTR_OPERATION_POINTWISE_TDESC);
    const View* b = b_desc != nullptr ? ViewOf(b_desc) : nullptr;
    const View* t = t_desc != nullptr ? ViewOf(t_desc) : nullptr;
    if (x == nullptr || y == nullptr || (b_desc != nullptr && b == nullptr) || (t_desc != nullptr && t == nullptr)) {
      return false;
    }
    const bool binary = mode == CUDNN_POINTWISE_ADD || mode == CUDNN_POINTWISE_SUB || mode == CUDNN_POINTWISE_MUL ||
                        mode == CUDNN_POINTWISE_DIV || mode == CUDNN_POINTWISE_CMP_GE ||
                        mode == CUDNN_POINTWISE_BINARY_SELECT;
    if (binary && b == nullptr) return Fail("a binary pointwise operation without b");
    if (mode == CUDNN_POINTWISE_BINARY_SELECT && t == nullptr) return Fail("BINARY_SELECT without t");
    if (mode == CUDNN_POINTWISE_GEN_INDEX && (axis < 0 || axis > 3)) return Fail("GEN_INDEX without an axis");
    switch (mode) {
      case CUDNN_POINTWISE_ADD:
      case CUDNN_POINTWISE_SUB:
      case CUDNN_POINTWISE_MUL:
      case CUDNN_POINTWISE_DIV:
      case CUDNN_POINTWISE_CMP_GE:
      case CUDNN_POINTWISE_BINARY_SELECT:
      case CUDNN_POINTWISE_EXP:
      case CUDNN_POINTWISE_LOG:
      case CUDNN_POINTWISE_IDENTITY:
      case CUDNN_POINTWISE_GEN_INDEX:
        break;
      default:
        return Fail("pointwise mode " + std::to_string(static_cast<int>(mode)) + " is not one it runs");
    }
    ForEach(y->dims, [&](const Index& i) {
      const float xv = mode == CUDNN_POINTWISE_GEN_INDEX ? 0.0f : x->Read(x->From(i, y->dims));
      const float bv = b != nullptr ? b->Read(b->From(i, y->dims)) : 0.0f;
      float value = 0;
      switch (mode) {
        case CUDNN_POINTWISE_ADD:
          value = xv + bv;
          break;
        case CUDNN_POINTWISE_SUB:
          value = xv - bv;
          break;
        case CUDNN_POINTWISE_MUL:
          value = xv * bv;
          break;
        case CUDNN_POINTWISE_DIV:
          value = xv / bv;
          break;
        case CUDNN_POINTWISE_CMP_GE:
          value = xv >= bv ? 1.0f : 0.0f;
          break;
        case CUDNN_POINTWISE_BINARY_SELECT:
          value = t->Read(t->From(i, y->dims)) != 0.0f ? xv : bv;
          break;
        case CUDNN_POINTWISE_EXP:
          value = std::exp(xv);
          break;
        case CUDNN_POINTWISE_LOG:
          value = std::log(xv);
          break;
        case CUDNN_POINTWISE_GEN_INDEX:
          value = static_cast<float>(i[static_cast<size_t>(axis)]);
          break;
        default:
          value = xv;
      }
      y->Write(i, value);
    });
    return true;
  }

  // y = the sum or maximum of the elements of x that View::From maps onto each of y's.
  bool Reduction(const Descriptor& op) {
    const Descriptor& r = *D(op.One<cudnnBackendDescriptor_t>(CUDNN_ATTR_OPERATION_REDUCTION_DESC));
    const auto kind = r.One<cudnnReduceTensorOp_t>(CUDNN_ATTR_REDUCTION_OPERATOR);
    if (kind != CUDNN_REDUCE_TENSOR_ADD && kind != CUDNN_REDUCE_TENSOR_MAX) {
      return Fail("reduction " + std::to_string(static_cast<int>(kind)) + " is not one it runs");
    }
    const View* x = ViewOf(op.One<cudnnBackendDescriptor_t>(CUDNN_ATTR_OPERATION_REDUCTION_XDESC));
    const View* y = ViewOf(op.One<cudnnBackendDescriptor_t>(CUDNN_ATTR_OPERATION_REDUCTION_YDESC));
    if (x == nullptr || y == nullptr) return false;
    const bool max = kind == CUDNN_REDUCE_TENSOR_MAX;
    int64_t span = 1;  // y's elements by offset
    for (int d = 0; d < 4; ++d) span += (y->dims[d] - 1) * y->strides[d];
    std::vector<float> acc(static_cast<size_t>(span), max ? -std::numeric_limits<float>::infinity() : 0.0f);
    ForEach(x->dims, [&](const Index& i) {
      float& into = acc[static_cast<size_t>(y->Offset(y->From(i, x->dims)))];
      const float v = x->Read(i);
      into = max ? std::max(into, v) : into + v;
    });
    ForEach(y->dims, [&](const Index& j) { y->Write(j, acc[static_cast<size_t>(y->Offset(j))]); });
    return true;
  }

  std::map<int64_t, void*> pointers_;
  std::map<cudnnBackendDescriptor_t, View> views_;
  std::vector<std::unique_ptr<std::vector<float>>> owned_;
};

}  // namespace

extern "C" {

size_t cudnnGetVersion(void) { return 91900; }

const char* cudnnGetErrorString(cudnnStatus_t status) {
  switch (status) {
    case CUDNN_STATUS_SUCCESS:
      return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_EXECUTION_FAILED:
      return "CUDNN_STATUS_EXECUTION_FAILED";
    case CUDNN_STATUS_BAD_PARAM:
      return "CUDNN_STATUS_BAD_PARAM";
    default:
      return "CUDNN_STATUS_NOT_SUPPORTED";
  }
}

void cudnnGetLastErrorString(char* message, size_t max_size) {
  const std::string why = !g_last_error.empty() ? g_last_error
                          : RefusesGraphs()
                              ? "Error: CUDNN_STATUS_BAD_PARAM; Reason: the stand-in refuses every operation graph"
                              : "Warning: CUDNN_STATUS_NOT_SUPPORTED; Reason: the stand-in has no engines";
  std::snprintf(message, max_size, "%s", why.c_str());
}

cudnnStatus_t cudnnCreate(cudnnHandle_t* handle) {
  *handle = reinterpret_cast<cudnnHandle_t>(&g_handle);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t) { return CUDNN_STATUS_SUCCESS; }

cudnnStatus_t cudnnSetStream(cudnnHandle_t, cudaStream_t) { return CUDNN_STATUS_SUCCESS; }

cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t type, cudnnBackendDescriptor_t* descriptor) {
  *descriptor = reinterpret_cast<cudnnBackendDescriptor_t>(new Descriptor{type, {}, nullptr});
  ++g_live;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t descriptor) {
  delete D(descriptor);
  --g_live;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t descriptor) {
  const bool graph = D(descriptor)->type == CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR;
  return graph && RefusesGraphs() ? CUDNN_STATUS_BAD_PARAM : CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t descriptor, cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t count, const void* values) {
  if (count < 0 || (count > 0 && values == nullptr)) return CUDNN_STATUS_BAD_PARAM;
  const auto* bytes = static_cast<const char*>(values);
  D(descriptor)->attributes[name].assign(bytes, bytes + static_cast<size_t>(count) * ElementSize(type));
  return CUDNN_STATUS_SUCCESS;
}

// The heuristics offer the host engine when there is one (each configuration remembers the graph); every other
// list is empty, and a plan needs no workspace.
cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const descriptor, cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t, int64_t requested, int64_t* elementCount,
                                       void* values) {
  int64_t count = 0;
  if (name == CUDNN_ATTR_ENGINEHEUR_RESULTS && HasHostEngine()) {
    count = requested == 0 ? 1 : std::min<int64_t>(requested, 1);
    if (values != nullptr && count > 0) {
      D(static_cast<cudnnBackendDescriptor_t*>(values)[0])->graph =
          D(descriptor)->One<cudnnBackendDescriptor_t>(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH);
    }
  } else if (name == CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE && values != nullptr) {
    *static_cast<int64_t*>(values) = 0;
    count = 1;
  }
  if (elementCount != nullptr) *elementCount = count;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendExecute(cudnnHandle_t, cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t pack) {
  g_last_error.clear();
  const auto config = D(plan)->One<cudnnBackendDescriptor_t>(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG);
  if (!HasHostEngine() || config == nullptr || D(config)->graph == nullptr) return CUDNN_STATUS_EXECUTION_FAILED;
  if (EnvIs("FAKE_CUDNN_ENGINE", "broken")) {
    g_last_error = "Error: CUDNN_STATUS_EXECUTION_FAILED; Reason: the stand-in's engine is broken";
    return CUDNN_STATUS_EXECUTION_FAILED;
  }
  const auto uids = D(pack)->Get<int64_t>(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS);
  const auto data = D(pack)->Get<void*>(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS);
  if (uids.size() != data.size()) return CUDNN_STATUS_BAD_PARAM;
  std::map<int64_t, void*> pointers;
  for (size_t i = 0; i < uids.size(); ++i) pointers[uids[i]] = data[i];
  HostEngine engine(std::move(pointers));
  return engine.Run(*D(D(config)->graph)) ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_EXECUTION_FAILED;
}

}  // extern "C"
