// A stand-in for cuBLASLt (built as libcublasLt.so.13) for the emulated GPU, whose "device memory" is host memory:
// the calls trainer/ops/cuda/matmul.cc makes, with the same column-major contract. D = alpha op(A) op(B) + beta D
// with bf16 A and B, bf16 or fp32 D, fp32 accumulation, and the epilogues matmul.cc asks for: BIAS, GELU_AUX and
// GELU_AUX_BIAS (aux receives the GELU input, D its tanh GELU), DGELU (D = product times GELU'(aux)), DGELU_BGRAD
// (DGELU, and the bias pointer receives D's row sums, summed in fp32 before D is rounded, in the bias type:
// BIAS_DATA_TYPE, else D's), BGRADB (the bias pointer receives op(B)'s column sums over k, in fp32, in the bias
// type). What real cuBLASLt refuses is refused here too (INVALID_VALUE): a layout whose shape
// does not match the product's, a leading dimension shorter than a column, an epilogue without the pointer it
// needs, an aux leading dimension that is not a multiple of 8. FAKE_CUBLASLT_DECLINE, a comma-separated list of
// epilogues (BIAS, GELU_AUX, GELU_AUX_BIAS, DGELU, DGELU_BGRAD, BGRADB): no algorithm for those (NOT_SUPPORTED from the
// heuristic), as a cuBLASLt without them would answer; NAME:F32, none for that one with an fp32 bias type (as
// cuBLASLt 13 on an H100 answered DGELU_BGRAD's). The heuristic offers up to three algorithms, all computing
// the same (FAKE_CUBLASLT_ALGORITHMS: how many); FAKE_CUBLASLT_SLOW_ALGORITHM=i (or a comma-separated list) makes the
// i-th of them take four times as long and 10 ms more per call, for the tuning of matmul.cc to avoid; with
// FAKE_CUBLASLT_DISTINCT_ALGORITHMS=1 algorithm i's products are (1 + i 2^-20) times the first's, standing in for
// the last bits by which real algorithms (another split of k) differ; a call with an algorithm the heuristic never
// offered fails. With FAKE_CUBLASLT_SPLIT_K=1 every algorithm of a product that writes bf16 splits k in two and
// adds the halves' results as bf16 holds them (CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE: their last bits lost), unless
// the preference's REDUCTION_SCHEME_MASK leaves out OUTPUT_TYPE and INPLACE, when they sum in fp32 as without the
// split. cublasLtGetVersion says 130100.
#include <cblas.h>
#include <cublasLt.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/half.h"

namespace {

struct Desc {
  cublasOperation_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  void* aux = nullptr;
  int64_t aux_ld = 0;
  int32_t bias_type = -1;
};

struct Layout {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
};

struct Preference {
  uint32_t reduction_schemes = CUBLASLT_REDUCTION_SCHEME_MASK;
};

int g_handle = 0;

float Read(const void* p, cudaDataType_t type, size_t i) {
  return type == CUDA_R_32F ? static_cast<const float*>(p)[i]
                            : srunway::common::BFloat16ToFloat(static_cast<const uint16_t*>(p)[i]);
}

void Write(void* p, cudaDataType_t type, size_t i, float value) {
  if (type == CUDA_R_32F) {
    static_cast<float*>(p)[i] = value;
  } else {
    static_cast<uint16_t*>(p)[i] = srunway::common::FloatToBFloat16(value);
  }
}

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

float Gelu(float x) { return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x))); }

float GeluGrad(float x) {
  const float th = std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x));
  return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
}

bool NeedsAux(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_DGELU ||
         e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
}
bool AddsBias(cublasLtEpilogue_t e) { return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS; }
bool NeedsBias(cublasLtEpilogue_t e) {
  return AddsBias(e) || e == CUBLASLT_EPILOGUE_DGELU_BGRAD || e == CUBLASLT_EPILOGUE_BGRADB;
}

// The heuristic's algorithms carry their index after this tag, so that a call with anything else is caught; and
// in their second word whether they add split-K results in bf16.
constexpr uint64_t kAlgorithmTag = 0x5eed0000;
constexpr uint64_t kBf16SplitK = 0xb16;

int Algorithms() {
  const char* count = std::getenv("FAKE_CUBLASLT_ALGORITHMS");
  return count != nullptr ? std::atoi(count) : 3;
}

// Whether the comma-separated `list` (an environment variable's value, or null) holds `item`.
bool Listed(const char* list, const std::string& item) {
  return list != nullptr && ("," + std::string(list) + ",").find("," + item + ",") != std::string::npos;
}

// Whether FAKE_CUBLASLT_DECLINE names the epilogue, alone or (with an fp32 bias type) as NAME:F32.
bool Declined(cublasLtEpilogue_t e, int32_t bias_type) {
  const char* list = std::getenv("FAKE_CUBLASLT_DECLINE");
  if (list == nullptr) return false;
  const char* name = nullptr;
  switch (e) {
    case CUBLASLT_EPILOGUE_BIAS: name = "BIAS"; break;
    case CUBLASLT_EPILOGUE_GELU_AUX: name = "GELU_AUX"; break;
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: name = "GELU_AUX_BIAS"; break;
    case CUBLASLT_EPILOGUE_DGELU: name = "DGELU"; break;
    case CUBLASLT_EPILOGUE_DGELU_BGRAD: name = "DGELU_BGRAD"; break;
    case CUBLASLT_EPILOGUE_BGRADB: name = "BGRADB"; break;
    default: return false;
  }
  return Listed(list, name) || (bias_type == CUDA_R_32F && Listed(list, std::string(name) + ":F32"));
}

}  // namespace

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  *handle = reinterpret_cast<cublasLtHandle_t>(&g_handle);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t) { return CUBLAS_STATUS_SUCCESS; }

const char* cublasLtGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_INTERNAL_ERROR";
  }
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale) {
  if (compute != CUBLAS_COMPUTE_32F || scale != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  *desc = reinterpret_cast<cublasLtMatmulDesc_t>(new Desc);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete reinterpret_cast<Desc*>(desc);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t opaque, cublasLtMatmulDescAttributes_t attribute,
                                              const void* buf, size_t size) {
  auto* desc = reinterpret_cast<Desc*>(opaque);
  auto take = [&](auto& field) {
    if (size != sizeof(field)) return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(&field, buf, size);
    return CUBLAS_STATUS_SUCCESS;
  };
  switch (attribute) {
    case CUBLASLT_MATMUL_DESC_TRANSA: return take(desc->trans_a);
    case CUBLASLT_MATMUL_DESC_TRANSB: return take(desc->trans_b);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return take(desc->epilogue);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return take(desc->bias);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return take(desc->aux);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return take(desc->aux_ld);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return take(desc->bias_type);
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (type != CUDA_R_16BF && type != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (ld < static_cast<int64_t>(rows)) return CUBLAS_STATUS_INVALID_VALUE;
  *layout = reinterpret_cast<cublasLtMatrixLayout_t>(new Layout{type, rows, cols, ld});
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete reinterpret_cast<Layout*>(layout);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  *pref = reinterpret_cast<cublasLtMatmulPreference_t>(new Preference);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete reinterpret_cast<Preference*>(pref);
  return CUBLAS_STATUS_SUCCESS;
}

// The reduction schemes are kept; the rest (workspace, alignments) is taken and changes nothing here.
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t opaque,
                                                    cublasLtMatmulPreferenceAttributes_t attribute, const void* buf,
                                                    size_t size) {
  if (attribute != CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK) return CUBLAS_STATUS_SUCCESS;
  auto* pref = reinterpret_cast<Preference*>(opaque);
  if (size != sizeof pref->reduction_schemes) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&pref->reduction_schemes, buf, size);
  return CUBLAS_STATUS_SUCCESS;
}

size_t cublasLtGetVersion() { return 130100; }

// SPLITK_NUM and REDUCTION_SCHEME of an algorithm the heuristic offered: 2 and OUTPUT_TYPE where it adds split-K
// halves in bf16, else 1 and NONE (its fp32 sums are as unsplit ones).
cublasStatus_t cublasLtMatmulAlgoConfigGetAttribute(const cublasLtMatmulAlgo_t* algo,
                                                    cublasLtMatmulAlgoConfigAttributes_t attribute, void* buf,
                                                    size_t size, size_t* written) {
  if (algo == nullptr || algo->data[0] - kAlgorithmTag >= static_cast<uint64_t>(Algorithms())) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  const bool split = algo->data[1] == kBf16SplitK;
  auto give = [&](auto value) {
    *written = sizeof value;
    if (size != sizeof value) return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(buf, &value, sizeof value);
    return CUBLAS_STATUS_SUCCESS;
  };
  switch (attribute) {
    case CUBLASLT_ALGO_CONFIG_SPLITK_NUM: return give(int32_t{split ? 2 : 1});
    case CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME:
      return give(uint32_t{split ? CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE : CUBLASLT_REDUCTION_SCHEME_NONE});
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t opaque,
                                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t d_opaque,
                                              cublasLtMatmulPreference_t pref_opaque, int requested,
                                              cublasLtMatmulHeuristicResult_t* results, int* found) {
  const auto* desc = reinterpret_cast<const Desc*>(opaque);
  const auto& pref = *reinterpret_cast<const Preference*>(pref_opaque);
  const char* split_k = std::getenv("FAKE_CUBLASLT_SPLIT_K");
  const bool bf16_sums = split_k != nullptr && std::strcmp(split_k, "1") == 0 &&
                         reinterpret_cast<const Layout*>(d_opaque)->type == CUDA_R_16BF &&
                         (pref.reduction_schemes & (CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE |
                                                    CUBLASLT_REDUCTION_SCHEME_INPLACE)) != 0;
  if (NeedsAux(desc->epilogue) && (desc->aux == nullptr || desc->aux_ld % 8 != 0)) return CUBLAS_STATUS_INVALID_VALUE;
  if (NeedsBias(desc->epilogue) && desc->bias == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (Declined(desc->epilogue, desc->bias_type)) return CUBLAS_STATUS_NOT_SUPPORTED;
  *found = std::max(0, std::min(requested, Algorithms()));
  for (int i = 0; i < *found; ++i) {
    std::memset(&results[i], 0, sizeof(results[i]));
    results[i].algo.data[0] = kAlgorithmTag + static_cast<uint64_t>(i);
    results[i].algo.data[1] = bf16_sums ? kBf16SplitK : 0;
    results[i].state = CUBLAS_STATUS_SUCCESS;
    results[i].wavesCount = 1.0f;
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t opaque, const void* alpha, const void* a,
                              cublasLtMatrixLayout_t a_opaque, const void* b, cublasLtMatrixLayout_t b_opaque,
                              const void* beta, const void* c, cublasLtMatrixLayout_t c_opaque, void* d,
                              cublasLtMatrixLayout_t d_opaque, const cublasLtMatmulAlgo_t* algo, void*, size_t,
                              cudaStream_t) {
  bool slow = false, bf16_sums = false;
  float scale = 1.0f;
  if (algo != nullptr) {
    bf16_sums = algo->data[1] == kBf16SplitK;
    const uint64_t index = algo->data[0] - kAlgorithmTag;
    if (index >= static_cast<uint64_t>(Algorithms())) return CUBLAS_STATUS_INVALID_VALUE;
    slow = Listed(std::getenv("FAKE_CUBLASLT_SLOW_ALGORITHM"), std::to_string(index));
    const char* distinct = std::getenv("FAKE_CUBLASLT_DISTINCT_ALGORITHMS");
    if (distinct != nullptr && std::strcmp(distinct, "1") == 0) scale = 1.0f + static_cast<float>(index) * 0x1p-20f;
  }
  // The slow algorithm takes four times as long, and 10 ms more: tuning times each candidate by the host's clock,
  // and beside other tests (the asan suite runs at nice 10 beside the slurm suite) a fast candidate's run can be
  // held off the CPU for a while; twice and 2 ms more let one of 47 products keep the slow one.
  const auto start = std::chrono::steady_clock::now();
  struct Slow {
    bool on;
    std::chrono::steady_clock::time_point start;
    ~Slow() {
      using std::chrono::steady_clock;
      if (on) std::this_thread::sleep_for(3 * (steady_clock::now() - start) + std::chrono::milliseconds(10));
    }
  } slow_down{slow, start};
  const auto& desc = *reinterpret_cast<const Desc*>(opaque);
  const auto& la = *reinterpret_cast<const Layout*>(a_opaque);
  const auto& lb = *reinterpret_cast<const Layout*>(b_opaque);
  const auto& lc = *reinterpret_cast<const Layout*>(c_opaque);
  const auto& ld = *reinterpret_cast<const Layout*>(d_opaque);
  const bool ta = desc.trans_a == CUBLAS_OP_T, tb = desc.trans_b == CUBLAS_OP_T;
  const uint64_t m = ld.rows, n = ld.cols, k = ta ? la.rows : la.cols;
  if ((ta ? la.cols : la.rows) != m || (tb ? lb.rows : lb.cols) != n || (tb ? lb.cols : lb.rows) != k ||
      la.type != CUDA_R_16BF || lb.type != CUDA_R_16BF || lc.rows != m || lc.cols != n || lc.type != ld.type) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (NeedsAux(desc.epilogue) && (desc.aux == nullptr || desc.aux_ld % 8 != 0 ||
                                  desc.aux_ld < static_cast<int64_t>(m))) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (NeedsBias(desc.epilogue) && desc.bias == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  const float alpha_value = *static_cast<const float*>(alpha), beta_value = *static_cast<const float*>(beta);
  // op(A) as rows of k and op(B) as columns of k, both contiguous in k, widened to fp32 (exactly, from bf16). Kept
  // from call to call: under ThreadSanitizer (cuda_ops_emulated-tsan) each free of these megabytes rewrote their
  // shadow memory, page by page, and that was most of the matmul group's two minutes.
  thread_local std::vector<float> kept_rows, kept_cols, kept_sums;
  std::vector<float>&rows = kept_rows, &cols = kept_cols, &sums = kept_sums;
  rows.resize(m * k);
  cols.resize(n * k);
  sums.resize(n * m);
  for (uint64_t i = 0; i < m; ++i) {
    for (uint64_t p = 0; p < k; ++p) rows[i * k + p] = Read(a, la.type, ta ? p + i * la.ld : i + p * la.ld);
  }
  for (uint64_t j = 0; j < n; ++j) {
    for (uint64_t p = 0; p < k; ++p) cols[j * k + p] = Read(b, lb.type, tb ? j + p * lb.ld : p + j * lb.ld);
  }
  // sums[j][i] = cols[j] . rows[i]: the fp32 products summed by OpenBLAS (summed one term at a time here, they
  // were a seventh of an emulated training run).
  // Split (bf16_sums, k >= 2): each half's sums into `sums` and `half_sums`, then added as bf16 holds them.
  thread_local std::vector<float> kept_half_sums;
  const bool split = bf16_sums && ld.type == CUDA_R_16BF && k >= 2;
  const uint64_t first = split ? k / 2 : k;
  if (m > 0 && n > 0) {
    const auto lead = static_cast<blasint>(std::max<uint64_t>(k, 1));
    auto product = [&](uint64_t from, uint64_t count, float* out) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(n), static_cast<blasint>(m),
                  static_cast<blasint>(count), 1.0f, cols.data() + from, lead, rows.data() + from, lead, 0.0f, out,
                  static_cast<blasint>(m));
    };
    product(0, first, sums.data());
    if (split) {
      kept_half_sums.resize(n * m);
      product(first, k - first, kept_half_sums.data());
      auto bf16 = [](float x) { return srunway::common::BFloat16ToFloat(srunway::common::FloatToBFloat16(x)); };
      for (size_t i = 0; i < sums.size(); ++i) sums[i] = bf16(sums[i]) + bf16(kept_half_sums[i]);
    }
  }
  const auto bias_type = desc.bias_type == -1 ? ld.type : static_cast<cudaDataType_t>(desc.bias_type);
  if (bias_type != ld.type && bias_type != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  std::vector<float> row_sums(desc.epilogue == CUBLASLT_EPILOGUE_DGELU_BGRAD ? m : 0);
  for (uint64_t j = 0; j < n; ++j) {
    for (uint64_t i = 0; i < m; ++i) {
      const size_t at = i + j * ld.ld, aux_at = i + j * desc.aux_ld;
      float value = alpha_value * scale * sums[j * m + i];
      if (beta_value != 0.0f) value += beta_value * Read(c, lc.type, i + j * lc.ld);
      if (AddsBias(desc.epilogue)) value += Read(desc.bias, bias_type, i);
      switch (desc.epilogue) {
        case CUBLASLT_EPILOGUE_GELU_AUX:
        case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
          Write(desc.aux, ld.type, aux_at, value);
          value = Gelu(value);
          break;
        case CUBLASLT_EPILOGUE_DGELU: value *= GeluGrad(Read(desc.aux, ld.type, aux_at)); break;
        case CUBLASLT_EPILOGUE_DGELU_BGRAD:
          value *= GeluGrad(Read(desc.aux, ld.type, aux_at));
          row_sums[i] += value;
          break;
        default: break;
      }
      Write(d, ld.type, at, value);
    }
  }
  for (uint64_t i = 0; i < row_sums.size(); ++i) Write(const_cast<void*>(desc.bias), bias_type, i, row_sums[i]);
  if (desc.epilogue == CUBLASLT_EPILOGUE_BGRADB) {
    for (uint64_t j = 0; j < n; ++j) {
      float sum = 0.0f;
      for (uint64_t p = 0; p < k; ++p) sum += cols[j * k + p];
      Write(const_cast<void*>(desc.bias), bias_type, j, sum);
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
