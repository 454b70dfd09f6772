// See matmul.h. Row-major tensors are read by cuBLASLt as column-major transposes: out[N, OC] is D (OC x N) with
// ld OC, inp[N, C] is (C x N) with ld C, weight[OC, C] is (C x OC) with ld C. So
//   forward  D(OC x N)  = W^T(OC x C) . inp(C x N)          (+ bias over D's rows: the BIAS epilogue)
//   dinp     D(C x N)   = W(C x OC) . dout(OC x N)          (beta 0, bf16)
//   dweight  D(C x OC) += inp(C x N) . dout^T(N x OC)        (beta 1, fp32 output from bf16 inputs)
// With GELU: the forward's GELU_AUX(_BIAS) epilogue stores GELU(D) and, as aux (ld OC), D itself; the dinp
// product's DGELU epilogue multiplies D by GELU'(aux), aux being the forward's (ld C).
#include "trainer/ops/cuda/matmul.h"

#include <cublasLt.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "common/log.h"
#include "common/site_library.h"

namespace srunway::trainer::cuda {

using common::Status;
using common::StatusOr;

// One product's shape and types, column-major: D (m x n) = op(A) (m x k) . op(B) (k x n).
struct Matmul::Gemm {
  cublasOperation_t trans_a, trans_b;
  int m, n, k;
  int64_t lda, ldb, ldd;
  cudaDataType_t d_type;
  float beta;
  const void* c = nullptr;  // what beta multiplies, laid out as D; null: D itself

  // The C cuBLASLt reads for a product written to `d`.
  const void* CFor(const void* d) const { return c != nullptr ? c : d; }
};

// What cuBLASLt applies to the product before it stores D.
struct Matmul::Epilogue {
  cublasLtEpilogue_t kind = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;  // BIAS, GELU_AUX_BIAS: [m], D's type; DGELU_BGRAD, BGRADB: receives the sums
  const void* aux = nullptr;   // GELU_AUX(_BIAS): receives the GELU input; DGELU: reads it; m x n, D's type
  int64_t aux_ld = 0;
  int32_t bias_type = -1;  // the bias's (or its gradient's) cudaDataType_t; -1: cuBLASLt's default, D's type
};

// What cuBLASLt's heuristic sees of a product: its shape and types, the epilogue, and the alignment of every
// pointer (0: none), which decides what algorithms can read and write them.
using MatmulPlanKey = std::tuple<int, int, int, int, int, int64_t, int64_t, int64_t, int, float, int, int64_t, int32_t,
                                 std::array<uint32_t, 6>>;

// A product's descriptors and the algorithm the heuristic chose, made at its first call and used for every later
// product with the same key (gpt-tiny's training makes 23 distinct products, all in its first step); only the
// bias and aux pointers are set anew each call. `status` NotFound: this cuBLASLt cannot do it (the GELU paths then take
// their kernels without asking again).
struct Matmul::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  Status status = Status::Ok();
  // With more than one candidate (tuning): which of how many `algo` is, for Choices.
  int chosen = -1;
  int candidates = 0;
};

struct Matmul::Algorithm {
  cublasLtMatmulAlgo_t algo;
};

struct Matmul::Api {
  common::DynamicLibrary lib;
  cublasLtHandle_t handle = nullptr;
  decltype(::cublasLtCreate)* create = nullptr;
  decltype(::cublasLtDestroy)* destroy = nullptr;
  decltype(::cublasLtGetStatusString)* status_string = nullptr;
  decltype(::cublasLtMatmulDescCreate)* desc_create = nullptr;
  decltype(::cublasLtMatmulDescDestroy)* desc_destroy = nullptr;
  decltype(::cublasLtMatmulDescSetAttribute)* desc_set = nullptr;
  decltype(::cublasLtMatrixLayoutCreate)* layout_create = nullptr;
  decltype(::cublasLtMatrixLayoutDestroy)* layout_destroy = nullptr;
  decltype(::cublasLtMatmulPreferenceCreate)* pref_create = nullptr;
  decltype(::cublasLtMatmulPreferenceDestroy)* pref_destroy = nullptr;
  decltype(::cublasLtMatmulPreferenceSetAttribute)* pref_set = nullptr;
  decltype(::cublasLtMatmulAlgoGetHeuristic)* heuristic = nullptr;
  decltype(::cublasLtMatmul)* matmul = nullptr;
  decltype(::cublasLtGetVersion)* version = nullptr;
  decltype(::cublasLtMatmulAlgoConfigGetAttribute)* algo_config = nullptr;
  std::map<MatmulPlanKey, Plan> plans = {};

  Status Check(cublasStatus_t rc, std::string_view what) const {
    if (rc == CUBLAS_STATUS_SUCCESS) return Status::Ok();
    return common::Internal("{} failed: {}", what, status_string(rc));
  }
  void Destroy(Plan& plan) const;
  // As Check, but what this cuBLASLt does not support (an epilogue, its attributes, or no algorithm for them) is
  // NotFound, which the GELU paths take as "use the kernels instead".
  Status CheckSupported(cublasStatus_t rc, std::string_view what) const {
    if (rc == CUBLAS_STATUS_NOT_SUPPORTED || rc == CUBLAS_STATUS_INVALID_VALUE) {
      return common::NotFound("{}: {}", what, status_string(rc));
    }
    return Check(rc, what);
  }
};

namespace {

// A product's key as Choices writes it: its fields in order, the alignments joined by '/'.
std::string KeyText(const MatmulPlanKey& key) {
  return std::apply(
      [](const auto&... field) {
        std::string text;
        auto add = [&text](const auto& value) {
          if (!text.empty()) text += ',';
          if constexpr (std::is_same_v<std::decay_t<decltype(value)>, std::array<uint32_t, 6>>) {
            text += fmt::format("{}", fmt::join(value, "/"));
          } else {
            text += fmt::format("{}", value);
          }
        };
        (add(field), ...);
        return text;
      },
      key);
}

// The largest power of two, up to 256, that divides the address: cuBLASLt assumes 256 unless told.
uint32_t Alignment(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  return address == 0 ? 256u : static_cast<uint32_t>(std::min<uintptr_t>(256, address & (~address + 1)));
}

}  // namespace

StatusOr<std::unique_ptr<Matmul>> Matmul::Open(Device& device, size_t workspace_bytes) {
  if (device.kind() != DeviceKind::kCuda) return common::InvalidArgument("cuBLASLt needs a GPU, not {}", device.name());
  SRUNWAY_ASSIGN_OR_RETURN(auto lib, common::OpenSiteLibrary({"SRUNWAY_CUBLASLT_LIBRARY",
                                                              {"libcublasLt.so.13", "libcublasLt.so.12",
                                                               "libcublasLt.so"}}));
  auto api = std::make_unique<Api>(Api{std::move(lib)});
  SRUNWAY_LOAD_SYMBOL(api->create, api->lib, cublasLtCreate);
  SRUNWAY_LOAD_SYMBOL(api->destroy, api->lib, cublasLtDestroy);
  SRUNWAY_LOAD_SYMBOL(api->status_string, api->lib, cublasLtGetStatusString);
  SRUNWAY_LOAD_SYMBOL(api->desc_create, api->lib, cublasLtMatmulDescCreate);
  SRUNWAY_LOAD_SYMBOL(api->desc_destroy, api->lib, cublasLtMatmulDescDestroy);
  SRUNWAY_LOAD_SYMBOL(api->desc_set, api->lib, cublasLtMatmulDescSetAttribute);
  SRUNWAY_LOAD_SYMBOL(api->layout_create, api->lib, cublasLtMatrixLayoutCreate);
  SRUNWAY_LOAD_SYMBOL(api->layout_destroy, api->lib, cublasLtMatrixLayoutDestroy);
  SRUNWAY_LOAD_SYMBOL(api->pref_create, api->lib, cublasLtMatmulPreferenceCreate);
  SRUNWAY_LOAD_SYMBOL(api->pref_destroy, api->lib, cublasLtMatmulPreferenceDestroy);
  SRUNWAY_LOAD_SYMBOL(api->pref_set, api->lib, cublasLtMatmulPreferenceSetAttribute);
  SRUNWAY_LOAD_SYMBOL(api->heuristic, api->lib, cublasLtMatmulAlgoGetHeuristic);
  SRUNWAY_LOAD_SYMBOL(api->matmul, api->lib, cublasLtMatmul);
  SRUNWAY_LOAD_SYMBOL(api->version, api->lib, cublasLtGetVersion);
  SRUNWAY_LOAD_SYMBOL(api->algo_config, api->lib, cublasLtMatmulAlgoConfigGetAttribute);
  SRUNWAY_RETURN_IF_ERROR(api->Check(api->create(&api->handle), "cublasLtCreate"));
  auto workspace = Buffer::Allocate(device, DType::kFloat32, workspace_bytes / sizeof(float));
  if (!workspace.ok()) {
    api->destroy(api->handle);
    return workspace.status().WithContext("cuBLASLt workspace");
  }
  auto matmul = std::unique_ptr<Matmul>(new Matmul(std::move(api), device, std::move(*workspace)));
  const char* epilogues = std::getenv("SRUNWAY_GELU_EPILOGUE");
  matmul->set_epilogues(epilogues == nullptr || std::strcmp(epilogues, "0") != 0);
  const char* bgradb = std::getenv("SRUNWAY_BGRADB");
  matmul->set_bgradb(bgradb == nullptr || std::strcmp(bgradb, "0") != 0);
  const char* tuning = std::getenv("SRUNWAY_GEMM_TUNE");
  matmul->set_tuning(tuning == nullptr || std::strcmp(tuning, "0") != 0);
  return matmul;
}

Matmul::Matmul(std::unique_ptr<Api> api, Device& device, Buffer workspace)
    : api_(std::move(api)), device_(device), workspace_(std::move(workspace)) {}

Matmul::~Matmul() {
  for (auto& [key, plan] : api_->plans) api_->Destroy(plan);
  api_->destroy(api_->handle);
}

const std::string& Matmul::library_path() const { return api_->lib.path(); }

void Matmul::Api::Destroy(Plan& plan) const {
  for (cublasLtMatrixLayout_t layout : {plan.a, plan.b, plan.d}) {
    if (layout != nullptr) layout_destroy(layout);
  }
  if (plan.desc != nullptr) desc_destroy(plan.desc);
  plan = Plan{};
}

std::string Matmul::GpuName() const {
  // The device's name without its PCI bus id: choices made on one H100 hold for every other.
  const std::string& name = device_.name();
  return name.substr(0, name.rfind(" ("));
}

size_t Matmul::LibraryVersion() const { return api_->version(); }

void Matmul::set_fp32_split_k_sums(bool on) {
  if (on == fp32_split_k_sums_) return;
  fp32_split_k_sums_ = on;
  for (auto& [key, plan] : api_->plans) api_->Destroy(plan);
  api_->plans.clear();
}

namespace {

// Choices' name for fp32_split_k_sums().
constexpr const char* kSplitKSums = "split_k_sums";

}  // namespace

common::Json Matmul::Choices() const {
  common::Json products = common::Json::object();
  for (const auto& [key, plan] : api_->plans) {
    if (plan.status.ok() && plan.chosen >= 0) products[KeyText(key)] = {plan.chosen, plan.candidates};
  }
  if (products.empty()) return nullptr;
  common::Json choices = {{"gpu", GpuName()}, {"cublaslt", LibraryVersion()}, {"products", std::move(products)}};
  if (fp32_split_k_sums_) choices[kSplitKSums] = "fp32";
  return choices;
}

Status Matmul::KeepChoices(const common::Json& choices) {
  constexpr std::string_view kWhat = "the GEMM choices";
  auto gpu = common::JsonField<std::string>(choices, "gpu", kWhat);
  auto version = common::JsonField<uint64_t>(choices, "cublaslt", kWhat);
  auto products = common::JsonField<common::Json>(choices, "products", kWhat);
  for (const Status& field : {gpu.status(), version.status(), products.status()}) {
    if (!field.ok()) return common::DataLoss("{}", field.message());
  }
  if (!products->is_object()) return common::DataLoss("{}: products is not an object", kWhat);
  std::map<std::string, std::pair<int, int>> kept;
  for (const auto& [key, choice] : products->items()) {
    if (!choice.is_array() || choice.size() != 2) {
      return common::DataLoss("{}: product {} is not [chosen, candidates]", kWhat, key);
    }
    auto chosen = common::JsonInteger<int>(choice[0], "chosen");
    auto candidates = common::JsonInteger<int>(choice[1], "candidates");
    if (!chosen.ok() || !candidates.ok() || *chosen < 0 || *chosen >= *candidates || *candidates > kTunedCandidates) {
      return common::DataLoss("{}: product {} has choice {}", kWhat, key, choice.dump());
    }
    kept[key] = {*chosen, *candidates};
  }
  if (*gpu != GpuName() || *version != LibraryVersion()) {
    return common::FailedPrecondition("{} were made on {} with cuBLASLt {}, this is {} with cuBLASLt {}", kWhat, *gpu,
                                      *version, GpuName(), LibraryVersion());
  }
  const auto sums = choices.find(kSplitKSums);
  if (sums != choices.end() && *sums != "fp32") {
    return common::DataLoss("{}: {} is {}, not \"fp32\"", kWhat, kSplitKSums, sums->dump());
  }
  if ((sums != choices.end()) != fp32_split_k_sums_) {
    constexpr std::string_view kFp32 = "kept fp32 (--disable-bf16-reduced-precision-matmul)";
    constexpr std::string_view kBf16 = "allowed in bf16";
    return common::FailedPrecondition("{} were made with split-K sums {}, this run has them {}", kWhat,
                                      fp32_split_k_sums_ ? kBf16 : kFp32, fp32_split_k_sums_ ? kFp32 : kBf16);
  }
  kept_ = std::move(kept);
  return Status::Ok();
}

Status Matmul::MakePlan(Plan& plan, const std::string& key, const Gemm& gemm, const void* a, const void* b, void* d,
                        const Epilogue& epilogue, Stream stream) {
  const Api& api = *api_;
  SRUNWAY_RETURN_IF_ERROR(
      api.Check(api.desc_create(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate"));
  SRUNWAY_RETURN_IF_ERROR(
      api.Check(api.desc_set(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &gemm.trans_a, sizeof gemm.trans_a),
                "cublasLtMatmulDescSetAttribute(TRANSA)"));
  SRUNWAY_RETURN_IF_ERROR(
      api.Check(api.desc_set(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &gemm.trans_b, sizeof gemm.trans_b),
                "cublasLtMatmulDescSetAttribute(TRANSB)"));
  if (epilogue.kind != CUBLASLT_EPILOGUE_DEFAULT) {
    SRUNWAY_RETURN_IF_ERROR(
        api.CheckSupported(api.desc_set(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue.kind, sizeof epilogue.kind),
                           "cublasLtMatmulDescSetAttribute(EPILOGUE)"));
  }
  if (epilogue.bias_type != -1) {
    SRUNWAY_RETURN_IF_ERROR(api.CheckSupported(
        api.desc_set(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &epilogue.bias_type, sizeof epilogue.bias_type),
        "cublasLtMatmulDescSetAttribute(BIAS_DATA_TYPE)"));
  }
  if (epilogue.aux != nullptr) {
    SRUNWAY_RETURN_IF_ERROR(api.CheckSupported(
        api.desc_set(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &epilogue.aux_ld, sizeof epilogue.aux_ld),
        "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_LD)"));
  }
  SRUNWAY_RETURN_IF_ERROR(SetPointers(plan, epilogue));
  const bool ta = gemm.trans_a == CUBLAS_OP_T, tb = gemm.trans_b == CUBLAS_OP_T;
  SRUNWAY_RETURN_IF_ERROR(
      api.Check(api.layout_create(&plan.a, CUDA_R_16BF, ta ? gemm.k : gemm.m, ta ? gemm.m : gemm.k, gemm.lda),
                "cublasLtMatrixLayoutCreate(A)"));
  SRUNWAY_RETURN_IF_ERROR(
      api.Check(api.layout_create(&plan.b, CUDA_R_16BF, tb ? gemm.n : gemm.k, tb ? gemm.k : gemm.n, gemm.ldb),
                "cublasLtMatrixLayoutCreate(B)"));
  SRUNWAY_RETURN_IF_ERROR(
      api.Check(api.layout_create(&plan.d, gemm.d_type, gemm.m, gemm.n, gemm.ldd), "cublasLtMatrixLayoutCreate(D)"));
  cublasLtMatmulPreference_t pref = nullptr;
  SRUNWAY_RETURN_IF_ERROR(api.Check(api.pref_create(&pref), "cublasLtMatmulPreferenceCreate"));
  struct DestroyPreference {
    const Api& api;
    cublasLtMatmulPreference_t pref;
    ~DestroyPreference() { api.pref_destroy(pref); }
  } destroy_preference{api, pref};
  const size_t workspace_bytes = workspace_.bytes();
  SRUNWAY_RETURN_IF_ERROR(api.Check(api.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                                 sizeof workspace_bytes), "cublasLtMatmulPreferenceSetAttribute"));
  const std::pair<cublasLtMatmulPreferenceAttributes_t, const void*> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, a}, {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, gemm.CFor(d)},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, d}};
  for (const auto& [attribute, pointer] : alignments) {
    const uint32_t bytes = Alignment(pointer);
    SRUNWAY_RETURN_IF_ERROR(api.Check(api.pref_set(pref, attribute, &bytes, sizeof bytes),
                                      "cublasLtMatmulPreferenceSetAttribute(alignment)"));
  }
  if (fp32_split_k_sums_ && gemm.d_type == CUDA_R_16BF) {
    // Unsplit, or partial sums added in the compute type (fp32); not in D's bf16 (OUTPUT_TYPE, INPLACE).
    const uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    SRUNWAY_RETURN_IF_ERROR(api.Check(api.pref_set(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes,
                                                   sizeof schemes),
                                      "cublasLtMatmulPreferenceSetAttribute(REDUCTION_SCHEME_MASK)"));
  }
  std::array<cublasLtMatmulHeuristicResult_t, kTunedCandidates> results{};
  int found = 0;
  ++algorithm_searches_;
  SRUNWAY_RETURN_IF_ERROR(api.CheckSupported(api.heuristic(api.handle, plan.desc, plan.a, plan.b, plan.d, plan.d, pref,
                                                           tuning_ ? kTunedCandidates : 1, results.data(), &found),
                                             "cublasLtMatmulAlgoGetHeuristic"));
  if (found == 0) {
    return common::NotFound("cuBLASLt has no algorithm for a {}x{}x{} product (op A {}, op B {}, epilogue {})",
                            gemm.m, gemm.n, gemm.k, ta ? "T" : "N", tb ? "T" : "N", static_cast<int>(epilogue.kind));
  }
  plan.algo = results[0].algo;
  if (found == 1) return Status::Ok();
  plan.candidates = std::min(found, kTunedCandidates);
  // A choice a checkpoint kept, among as many candidates as then: taken, not timed again.
  if (auto kept = kept_.find(key); kept != kept_.end() && kept->second.second == plan.candidates) {
    plan.chosen = kept->second.first;
    plan.algo = results[plan.chosen].algo;
    ++kept_products_;
    return Status::Ok();
  }
  std::vector<Algorithm> candidates;
  for (int i = 0; i < plan.candidates; ++i) candidates.push_back({results[i].algo});
  return ChooseFastest(plan, candidates, gemm, a, b, d, stream)
      .WithContext(fmt::format("timing cuBLASLt's algorithms for a {}x{}x{} product", gemm.m, gemm.n, gemm.k));
}

Status Matmul::ChooseFastest(Plan& plan, const std::vector<Algorithm>& candidates, const Gemm& gemm, const void* a,
                             const void* b, void* d, Stream stream) {
  const Api& api = *api_;
  const std::unique_ptr<trainer::Stream> on = device_.Adopt(stream);
  // A product that adds into D (beta 1 and no other C: the weight gradients) runs its candidates into a zeroed
  // scratch D, so that D gains the product once, by the call that follows; the other outputs (D with beta 0 or
  // its own C, the GELU input saved in aux, the bias gradients' sums) are written whole by that call, so the
  // candidates write them in place.
  Buffer scratch;
  void* out = d;
  if (gemm.beta != 0.0f && gemm.c == nullptr) {
    auto allocated = Buffer::Allocate(device_, gemm.d_type == CUDA_R_32F ? DType::kFloat32 : DType::kBFloat16,
                                      static_cast<size_t>(gemm.ldd) * static_cast<size_t>(gemm.n));
    if (!allocated.ok()) {  // no room to time it: the heuristic's first, as without tuning
      common::LogDebug("cuBLASLt {}x{}x{}: not timed: {}", gemm.m, gemm.n, gemm.k, allocated.status().message());
      return Status::Ok();
    }
    scratch = std::move(*allocated);
    SRUNWAY_RETURN_IF_ERROR(device_.Zero(scratch.data(), scratch.bytes(), *on));
    out = scratch.data();
  }
  const float alpha = 1.0f;
  // Milliseconds per run of candidate i, `runs` queued back to back; infinity if cuBLASLt refused to run it.
  auto time = [&](size_t i, int runs) -> StatusOr<double> {
    SRUNWAY_RETURN_IF_ERROR(device_.Synchronize(*on));
    const auto start = std::chrono::steady_clock::now();
    for (int run = 0; run < runs; ++run) {
      if (api.matmul(api.handle, plan.desc, &alpha, a, plan.a, b, plan.b, &gemm.beta, gemm.CFor(out), plan.d, out,
                     plan.d, &candidates[i].algo, workspace_.data(), workspace_.bytes(),
                     static_cast<cudaStream_t>(stream)) != CUBLAS_STATUS_SUCCESS) {
        return std::numeric_limits<double>::infinity();
      }
    }
    SRUNWAY_RETURN_IF_ERROR(device_.Synchronize(*on));
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / runs;
  };
  // Each candidate once (its first run loads its kernels), then enough runs of each to fill about a millisecond,
  // twice, the better of the two kept: the host's synchronisation then adds a few percent at most.
  std::vector<double> ms(candidates.size(), std::numeric_limits<double>::infinity());
  for (size_t i = 0; i < candidates.size(); ++i) {
    SRUNWAY_ASSIGN_OR_RETURN(ms[i], time(i, 1));
  }
  SRUNWAY_ASSIGN_OR_RETURN(const double once, time(0, 1));
  const int runs = std::isfinite(once) ? static_cast<int>(std::clamp(1.0 / std::max(once, 1e-3), 1.0, 20.0)) : 1;
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (!std::isfinite(ms[i])) continue;
      SRUNWAY_ASSIGN_OR_RETURN(const double mean, time(i, runs));
      ms[i] = round == 0 ? mean : std::min(ms[i], mean);
    }
  }
  size_t best = 0;
  for (size_t i = 1; i < candidates.size(); ++i) {
    if (ms[i] < ms[best]) best = i;
  }
  // The heuristic's first unless another is clearly faster (3%), so that noise does not decide.
  if (best != 0 && std::isfinite(ms[0]) && ms[best] > 0.97 * ms[0]) best = 0;
  ++tuned_products_;
  if (best != 0) ++tuned_changes_;
  plan.algo = candidates[best].algo;
  plan.chosen = static_cast<int>(best);
  common::LogDebug(
      "cuBLASLt {}x{}x{} (beta {}): {} algorithms timed, the heuristic's first {:.4f} ms, kept #{} at "
      "{:.4f} ms",
      gemm.m, gemm.n, gemm.k, gemm.beta, candidates.size(), ms[0], best, ms[best]);
  return Status::Ok();
}

void Matmul::LogSplitK(const Plan& plan, const Gemm& gemm) const {
  int32_t parts = 1;
  uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_NONE;
  size_t written = 0;
  if (api_->algo_config(&plan.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &parts, sizeof parts, &written) !=
          CUBLAS_STATUS_SUCCESS ||
      api_->algo_config(&plan.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof scheme, &written) !=
          CUBLAS_STATUS_SUCCESS ||
      parts <= 1) {
    return;
  }
  // INPLACE and OUTPUT_TYPE add the parts in D's type, COMPUTE_TYPE in fp32.
  const bool in_d_type = scheme == CUBLASLT_REDUCTION_SCHEME_INPLACE || scheme == CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
  common::LogDebug("cuBLASLt {}x{}x{}: k split in {}, the parts added in {} (reduction scheme {})", gemm.m, gemm.n,
                   gemm.k, parts, in_d_type && gemm.d_type == CUDA_R_16BF ? "bf16" : "fp32", scheme);
}

Status Matmul::SetPointers(const Plan& plan, const Epilogue& epilogue) {
  const Api& api = *api_;
  if (epilogue.bias != nullptr) {
    SRUNWAY_RETURN_IF_ERROR(
        api.Check(api.desc_set(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &epilogue.bias, sizeof epilogue.bias),
                  "cublasLtMatmulDescSetAttribute(BIAS_POINTER)"));
  }
  if (epilogue.aux != nullptr) {
    SRUNWAY_RETURN_IF_ERROR(api.CheckSupported(
        api.desc_set(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &epilogue.aux, sizeof epilogue.aux),
        "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_POINTER)"));
  }
  return Status::Ok();
}

Status Matmul::Run(const Gemm& gemm, const void* a, const void* b, void* d, const Epilogue& epilogue, Stream stream) {
  Api& api = *api_;
  auto aligned = [](const void* p) { return p == nullptr ? 0u : Alignment(p); };
  const MatmulPlanKey key{
      gemm.trans_a,
      gemm.trans_b,
      gemm.m,
      gemm.n,
      gemm.k,
      gemm.lda,
      gemm.ldb,
      gemm.ldd,
      gemm.d_type,
      gemm.beta,
      epilogue.kind,
      epilogue.aux_ld,
      epilogue.bias_type,
      std::array{aligned(a), aligned(b), aligned(d), aligned(epilogue.bias), aligned(epilogue.aux), aligned(gemm.c)}};
  auto [it, made] = api.plans.try_emplace(key);
  Plan& plan = it->second;
  if (made) {
    Status made_status = MakePlan(plan, KeyText(key), gemm, a, b, d, epilogue, stream);
    if (!made_status.ok()) {
      api.Destroy(plan);  // resets the plan, status included
      // Only "not supported" is an answer to keep; any other failure may pass.
      if (made_status.code() == common::StatusCode::kNotFound) {
        plan.status = made_status;
      } else {
        api.plans.erase(it);
      }
      return made_status;
    }
    if (common::LogEnabled(common::LogLevel::kDebug)) LogSplitK(plan, gemm);
  } else {
    SRUNWAY_RETURN_IF_ERROR(plan.status);
    SRUNWAY_RETURN_IF_ERROR(SetPointers(plan, epilogue));
  }
  const float alpha = 1.0f;
  return api.Check(api.matmul(api.handle, plan.desc, &alpha, a, plan.a, b, plan.b, &gemm.beta, gemm.CFor(d),
                              plan.d, d, plan.d, &plan.algo, workspace_.data(), workspace_.bytes(),
                              static_cast<cudaStream_t>(stream)),
                   "cublasLtMatmul");
}

Matmul::Gemm Matmul::ForwardProduct(int N, int C, int OC) {
  return {CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, C, C, OC, CUDA_R_16BF, 0.0f};
}

Matmul::Gemm Matmul::InputGradientProduct(int N, int C, int OC) {
  return {CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, C, OC, C, CUDA_R_16BF, 0.0f};
}

Status Matmul::Forward(bf16* out, const bf16* inp, const bf16* weight, const bf16* bias, int N, int C, int OC,
                       Stream stream, const bf16* residual) {
  const Epilogue epilogue{bias != nullptr ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT, bias};
  Gemm product = ForwardProduct(N, C, OC);
  if (residual != nullptr) {
    product.beta = 1.0f;
    product.c = residual;
  }
  return Run(product, weight, inp, out, epilogue, stream);
}

Status Matmul::Backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                        const bf16* weight, int N, int C, int OC, Stream stream, bool write_dweight) {
  if (dinp != nullptr) {
    SRUNWAY_RETURN_IF_ERROR(Run(InputGradientProduct(N, C, OC), weight, dout, dinp, {}, stream).WithContext("dinp"));
  }
  return WeightGradients(dweight, dbias, dout, inp, N, C, OC, stream, write_dweight);
}

Status Matmul::WeightGradients(float* dweight, float* dbias, const bf16* dout, const bf16* inp, int N, int C, int OC,
                               Stream stream, bool write_dweight) {
  // dweight (C x OC, column-major) += inp^T dout (beta 1; = with write_dweight, beta 0): op(B) is dout, k runs over
  // the N rows, so BGRADB's sums over k are dout's column sums, the bias gradient, read once for both.
  const Gemm product{CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, C, OC, C, CUDA_R_32F, write_dweight ? 0.0f : 1.0f};
  if (dweight != nullptr && dbias != nullptr && epilogues_ && bgradb_) {
    Status status = RunAddingBiasSums(product, inp, dout, dweight, {CUBLASLT_EPILOGUE_BGRADB}, dbias, OC, stream);
    if (status.ok()) ++bgradb_sums_;
    if (status.code() != common::StatusCode::kNotFound) return status.WithContext("dweight");
    ++bgradb_fallbacks_;
  }
  if (dweight != nullptr) SRUNWAY_RETURN_IF_ERROR(Run(product, inp, dout, dweight, {}, stream).WithContext("dweight"));
  if (dbias != nullptr) SRUNWAY_RETURN_IF_ERROR(BiasGradientKernel(dbias, dout, N, OC, stream));
  return Status::Ok();
}

Status Matmul::RunAddingBiasSums(const Gemm& gemm, const void* a, const void* b, void* d, Epilogue epilogue,
                                 float* dbias, int count, Stream stream, bool bf16_sums) {
  SRUNWAY_RETURN_IF_ERROR(Grow(bias_sums_, device_, DType::kFloat32, static_cast<size_t>(count), device_.main_stream())
                              .WithContext("the bias gradient epilogue's sums"));
  epilogue.bias = bias_sums_.data();
  epilogue.bias_type = bf16_sums ? CUDA_R_16BF : CUDA_R_32F;
  SRUNWAY_RETURN_IF_ERROR(Run(gemm, a, b, d, epilogue, stream));
  const int rc = bf16_sums ? AddBf16BiasGradient(dbias, bias_sums_.as<bf16>(), count, stream)
                           : AddBiasGradient(dbias, bias_sums_.as<float>(), count, stream);
  if (rc != 0) return common::Internal("bias gradient kernel: {}", ErrorText(rc));
  return Status::Ok();
}

Status Matmul::BiasGradientKernel(float* dbias, const bf16* dout, int N, int OC, Stream stream) {
  // cuBLASLt's workspace is free between products on this stream: it holds the chunk sums.
  if (int rc = BiasGradient(dbias, dout, N, OC, workspace_.as<float>(),
                            static_cast<int64_t>(workspace_.bytes() / sizeof(float)), stream);
      rc != 0) {
    return common::Internal("bias gradient kernel: {}", ErrorText(rc));
  }
  return Status::Ok();
}

Status Matmul::ForwardGelu(bf16* act, bf16* pre, const bf16* inp, const bf16* weight, const bf16* bias, int N, int C,
                           int OC, Stream stream) {
  if (epilogues_ && OC % 8 == 0) {
    const Epilogue epilogue{bias != nullptr ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX, bias, pre,
                            OC};
    Status fused = Run(ForwardProduct(N, C, OC), weight, inp, act, epilogue, stream);
    if (fused.code() != common::StatusCode::kNotFound) return fused;
    ++gelu_fallbacks_;
  }
  SRUNWAY_RETURN_IF_ERROR(Forward(pre, inp, weight, bias, N, C, OC, stream));
  if (int rc = GeluForward(act, pre, int64_t{N} * OC, stream); rc != 0) {
    return common::Internal("GELU kernel: {}", ErrorText(rc));
  }
  return Status::Ok();
}

Status Matmul::BackwardGelu(bf16* dpre, float* dpre_bias, float* dweight, float* dbias, const bf16* dout,
                            const bf16* act, const bf16* pre, const bf16* weight, int N, int C, int OC, Stream stream,
                            bool write_dweight) {
  const Gemm dinp = InputGradientProduct(N, C, OC);
  bool fused = false, bias_fused = false;
  // Whether a failure is one to return: NotFound (this cuBLASLt cannot do the epilogue) is not, it falls back.
  auto failed = [](const Status& status) { return !status.ok() && status.code() != common::StatusCode::kNotFound; };
  if (epilogues_ && C % 8 == 0) {
    if (dpre_bias != nullptr) {
      // The sums in fp32 where this cuBLASLt has them so (cuBLASLt 13 on an H100 has not), else in its default
      // type, D's: bf16, rounded once from its fp32 sums, as PyTorch's autocast rounds a bias gradient.
      for (bool bf16_sums : {false, true}) {
        Status status = RunAddingBiasSums(dinp, weight, dout, dpre, {CUBLASLT_EPILOGUE_DGELU_BGRAD, nullptr, pre, C},
                                          dpre_bias, C, stream, bf16_sums);
        if (failed(status)) return status.WithContext("dinp");
        fused = bias_fused = status.ok();
        if (bias_fused) {
          if (bf16_sums) ++bf16_bias_sums_;
          break;
        }
      }
      if (!bias_fused) ++bias_gradient_fallbacks_;
    }
    if (!fused) {
      Status status = Run(dinp, weight, dout, dpre, {CUBLASLT_EPILOGUE_DGELU, nullptr, pre, C}, stream);
      if (failed(status)) return status.WithContext("dinp");
      fused = status.ok();
      if (!fused) ++gelu_fallbacks_;
    }
  }
  if (!fused) {
    SRUNWAY_RETURN_IF_ERROR(Run(dinp, weight, dout, dpre, {}, stream).WithContext("dinp"));
    // d(pre) = GELU'(pre) * d(act), in place.
    if (int rc = GeluBackward(dpre, pre, dpre, int64_t{N} * C, stream); rc != 0) {
      return common::Internal("GELU backward kernel: {}", ErrorText(rc));
    }
  }
  if (dpre_bias != nullptr && !bias_fused) SRUNWAY_RETURN_IF_ERROR(BiasGradientKernel(dpre_bias, dpre, N, C, stream));
  return WeightGradients(dweight, dbias, dout, act, N, C, OC, stream, write_dweight);
}

}  // namespace srunway::trainer::cuda
