// A kernel timeline for any CUDA program, without Nsight Systems: an LD_PRELOAD library that
// turns on CUPTI's concurrent-kernel activity records at load and, at exit, writes one CSV line
// per kernel (graph-launched kernels included) to $DSINFER_TRACE_OUT:
//   start_ns,end_ns,stream,correlation,graph_node,grid_x,grid_y,grid_z,block_x,name
// Kernels of one graph launch share its correlation id. Build and use: tools/cupti_trace/README.md.
#include <cupti.h>

#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Row {
  uint64_t start, end, node;
  uint32_t stream, corr;
  int32_t gx, gy, gz, bx;
  std::string name;
};

std::mutex mu;
std::vector<Row>* rows = nullptr;

#define CUPTI_OK(call)                                                              \
  do {                                                                              \
    CUptiResult r_ = (call);                                                        \
    if (r_ != CUPTI_SUCCESS) {                                                      \
      const char* s_ = nullptr;                                                     \
      cuptiGetResultString(r_, &s_);                                                \
      std::fprintf(stderr, "cupti_trace: %s: %s\n", #call, s_ ? s_ : "?");          \
    }                                                                               \
  } while (0)

std::string Demangle(const char* mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string s = status == 0 && d ? d : mangled;
  std::free(d);
  // Drop the parameter list: the parenthesis matching the final ')' (template arguments may hold
  // parentheses of their own, as in "<(bool)1>").
  if (!s.empty() && s.back() == ')') {
    int depth = 0;
    for (size_t i = s.size(); i-- > 0;) {
      if (s[i] == ')') ++depth;
      if (s[i] == '(' && --depth == 0) {
        s.resize(i);
        break;
      }
    }
  }
  if (s.rfind("void ", 0) == 0) s.erase(0, 5);
  for (const char* ns : {"dsinfer::backend::cuda::", "(anonymous namespace)::"})
    for (size_t at; (at = s.find(ns)) != std::string::npos;) s.erase(at, std::strlen(ns));
  for (char& c : s)
    if (c == ',') c = ';';
  return s;
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = 8 << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
    rows->push_back(Row{k->start, k->end, k->graphNodeId, k->streamId, k->correlationId, k->gridX,
                        k->gridY, k->gridZ, k->blockX, Demangle(k->name)});
  }
  std::free(buffer);
}

struct Tracer {
  Tracer() {
    rows = new std::vector<Row>();
    CUPTI_OK(cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted));
    CUPTI_OK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    CUPTI_OK(cuptiActivityFlushPeriod(20));  // (CUDA 13 still delivers them at the final flush)
  }
  ~Tracer() {
    CUPTI_OK(cuptiActivityFlushAll(1));
    // A process that ran no kernels (a child the traced program spawns inherits LD_PRELOAD) must
    // not replace the traced process's file with an empty one.
    if (rows->empty()) return;
    const char* path = std::getenv("DSINFER_TRACE_OUT");
    std::FILE* f = std::fopen(path ? path : "kernel_trace.csv", "w");
    if (f == nullptr) return;
    std::fprintf(f, "start_ns,end_ns,stream,correlation,graph_node,grid_x,grid_y,grid_z,block_x,name\n");
    for (const Row& r : *rows)
      std::fprintf(f, "%llu,%llu,%u,%u,%llu,%d,%d,%d,%d,%s\n",
                   static_cast<unsigned long long>(r.start), static_cast<unsigned long long>(r.end),
                   r.stream, r.corr, static_cast<unsigned long long>(r.node), r.gx, r.gy, r.gz, r.bx,
                   r.name.c_str());
    std::fclose(f);
  }
};

Tracer tracer;

}  // namespace
