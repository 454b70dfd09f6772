// A stand-in for cuDNN (built as libcudnn.so.9) that has no engine for any graph, as a cuDNN without one for a
// shape behaves: cudnnCreate and every descriptor call succeed, the heuristics offer nothing and say why through
// cudnnGetLastErrorString, and executing is an error (nothing may get that far). It counts the descriptors made
// and destroyed, and with FAKE_CUDNN_REPORT=1 prints at exit how many were never destroyed. With
// FAKE_CUDNN_BAD_GRAPH=1 it refuses to finalize any operation graph (CUDNN_STATUS_BAD_PARAM), as a cuDNN too old
// for one of the graph's operations does.
#include <cudnn_graph.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace {

std::atomic<long> g_live{0};

struct Descriptor {
  cudnnBackendDescriptorType_t type;
};

struct Report {
  ~Report() {
    const char* report = std::getenv("FAKE_CUDNN_REPORT");
    if (report != nullptr && report[0] == '1')
      std::fprintf(stderr, "fake cuDNN: %ld descriptors left\n", g_live.load());
  }
} g_report;

int g_handle = 0;

bool RefusesGraphs() {
  const char* bad_graph = std::getenv("FAKE_CUDNN_BAD_GRAPH");
  return bad_graph != nullptr && bad_graph[0] == '1';
}

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
  std::snprintf(message, max_size, "%s",
                RefusesGraphs() ? "Error: CUDNN_STATUS_BAD_PARAM; Reason: the stand-in refuses every operation graph"
                                : "Warning: CUDNN_STATUS_NOT_SUPPORTED; Reason: the stand-in has no engines");
}

cudnnStatus_t cudnnCreate(cudnnHandle_t* handle) {
  *handle = reinterpret_cast<cudnnHandle_t>(&g_handle);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t) { return CUDNN_STATUS_SUCCESS; }

cudnnStatus_t cudnnSetStream(cudnnHandle_t, cudaStream_t) { return CUDNN_STATUS_SUCCESS; }

cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t type, cudnnBackendDescriptor_t* descriptor) {
  *descriptor = reinterpret_cast<cudnnBackendDescriptor_t>(new Descriptor{type});
  ++g_live;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t descriptor) {
  delete reinterpret_cast<Descriptor*>(descriptor);
  --g_live;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t descriptor) {
  const bool graph = reinterpret_cast<Descriptor*>(descriptor)->type == CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR;
  return graph && RefusesGraphs() ? CUDNN_STATUS_BAD_PARAM : CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t,
                                       cudnnBackendAttributeType_t, int64_t, const void*) {
  return CUDNN_STATUS_SUCCESS;
}

// Every list is empty: the heuristics' engines above all.
cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const, cudnnBackendAttributeName_t,
                                       cudnnBackendAttributeType_t, int64_t, int64_t* elementCount, void*) {
  if (elementCount != nullptr) *elementCount = 0;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendExecute(cudnnHandle_t, cudnnBackendDescriptor_t, cudnnBackendDescriptor_t) {
  return CUDNN_STATUS_EXECUTION_FAILED;
}

}  // extern "C"
