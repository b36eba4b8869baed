#include "backend/cuda/runtime.h"

#include <cuda_profiler_api.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "backend/cuda/check.cuh"
#include "base/check.h"

namespace dsinfer::backend::cuda {

namespace {

// An attribute of the current device.
int CurrentDeviceAttr(cudaDeviceAttr attr) {
  int dev = 0, v = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&v, attr, dev));
  return v;
}

}  // namespace

namespace {

KernelOptions& MutableKernelOptions() {
  static KernelOptions options;
  return options;
}
std::atomic<bool> g_kernel_options_read{false};

}  // namespace

void SetKernelOptions(const KernelOptions& options) {
  DSINFER_CHECK_MSG(!g_kernel_options_read.load(), "SetKernelOptions after the first launch");
  DSINFER_CHECK(options.qlinear_warps >= 0 && options.qlinear_warps <= 16);
  DSINFER_CHECK(options.qexpert_rows_min_slots >= 0);
  MutableKernelOptions() = options;
}

const KernelOptions& GetKernelOptions() {
  g_kernel_options_read.store(true, std::memory_order_relaxed);
  return MutableKernelOptions();
}

void AutoCarveout(const void* kernel, unsigned threads, size_t dyn_smem) {
  struct Shape {
    const void* kernel;
    unsigned threads;
    size_t smem;
  };
  static std::mutex mu;
  static std::vector<Shape> seen;                       // launch shapes handled
  static std::vector<std::pair<const void*, int>> set;  // kernel, percent applied
  std::lock_guard<std::mutex> lock(mu);
  for (const Shape& sh : seen)
    if (sh.kernel == kernel && sh.threads == threads && sh.smem == dyn_smem) return;
  seen.push_back({kernel, threads, dyn_smem});
  cudaFuncAttributes fa;
  CUDA_CHECK(cudaFuncGetAttributes(&fa, kernel));
  // The occupancy query honours the kernel's current preference: ask it under the largest split
  // (else a shape launched after a smaller one would be sized by the smaller one's split).
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
  int blocks = 0;
  const cudaError_t occ = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &blocks, kernel, static_cast<int>(threads), dyn_smem);
  if (occ != cudaSuccess) {
    // A launch the kernel cannot take: name it (the query itself only says "invalid argument").
    const char* name = nullptr;
    if (cudaFuncGetName(&name, kernel) != cudaSuccess || name == nullptr) name = "?";
    std::fprintf(stderr,
                 "kernel %s: a launch of %u threads and %zu bytes of dynamic shared memory failed "
                 "its occupancy query (%s); the kernel takes at most %d threads and %d bytes "
                 "(static %zu, %d registers)\n",
                 name, threads, dyn_smem, cudaGetErrorString(occ), fa.maxThreadsPerBlock,
                 fa.maxDynamicSharedSizeBytes, fa.sharedSizeBytes, fa.numRegs);
    std::abort();
  }
  // The SM's shared memory and the per-block reservation (H200: 228 KB, 1 KB).
  static const int sm_smem =
      std::max(CurrentDeviceAttr(cudaDevAttrMaxSharedMemoryPerMultiprocessor), 1);
  static const int reserved = CurrentDeviceAttr(cudaDevAttrReservedSharedMemoryPerBlock);
  const size_t per_block = fa.sharedSizeBytes + dyn_smem;
  const size_t need =
      per_block == 0 ? 0 : static_cast<size_t>(std::max(blocks, 1)) * (per_block + reserved);
  const size_t total = static_cast<size_t>(sm_smem);
  const int pct = static_cast<int>(std::min<size_t>(100, (need * 100 + total - 1) / total));
  auto it = std::find_if(set.begin(), set.end(), [&](const auto& e) { return e.first == kernel; });
  if (it == set.end()) it = set.insert(set.end(), {kernel, -1});
  it->second = std::max(it->second, pct);
  CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, it->second));
}

bool DeviceAvailable() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return n > 0;
}

int SmCount() {
  static const int sms = CurrentDeviceAttr(cudaDevAttrMultiProcessorCount);
  return sms;
}

std::string DeviceDescription() {
  if (!DeviceAvailable()) return "";
  cudaDeviceProp p{};
  CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
  return std::string(p.name) + ", " + std::to_string(p.multiProcessorCount) + " SMs, CC " +
         std::to_string(p.major) + "." + std::to_string(p.minor) + ", " +
         std::to_string(p.totalGlobalMem >> 30) + " GiB";
}

template <MemoryKind K>
Buffer<K>::Buffer(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  if constexpr (K == MemoryKind::kDevice) {
    CUDA_CHECK(cudaMalloc(&ptr_, bytes));
  } else {
    CUDA_CHECK(cudaMallocHost(&ptr_, bytes));
  }
}

template <MemoryKind K>
Buffer<K> Buffer<K>::TryAllocate(size_t bytes) {
  Buffer b;
  if (bytes == 0) return b;
  cudaError_t err;
  if constexpr (K == MemoryKind::kDevice) {
    err = cudaMalloc(&b.ptr_, bytes);
  } else {
    err = cudaMallocHost(&b.ptr_, bytes);
  }
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // an allocation failure is not sticky: clear it
    b.ptr_ = nullptr;
    return b;
  }
  b.bytes_ = bytes;
  return b;
}

template <MemoryKind K>
void Buffer<K>::Release() {
  if (!ptr_) return;
  if constexpr (K == MemoryKind::kDevice) {
    cudaFree(ptr_);
  } else {
    cudaFreeHost(ptr_);
  }
  ptr_ = nullptr;
}

template class Buffer<MemoryKind::kDevice>;
template class Buffer<MemoryKind::kPinnedHost>;

Stream::Stream() { CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
Stream::~Stream() {
  if (stream_) cudaStreamDestroy(stream_);
}
void Stream::Synchronize() const { CUDA_CHECK(cudaStreamSynchronize(stream_)); }

void SynchronizeStream(StreamHandle stream) { CUDA_CHECK(cudaStreamSynchronize(stream)); }

void CopyToDevice(void* dst, const void* src, size_t bytes, StreamHandle s) {
  if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
}
void CopyToHost(void* dst, const void* src, size_t bytes, StreamHandle s) {
  if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
}
void CopyDeviceToDevice(void* dst, const void* src, size_t bytes, StreamHandle s) {
  if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
}
void Memset(void* dst, int value, size_t bytes, StreamHandle s) {
  if (bytes) CUDA_CHECK(cudaMemsetAsync(dst, value, bytes, s));
}
void CopyToDeviceSync(void* dst, const void* src, size_t bytes) {
  if (!bytes) return;
  CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  // From pageable memory cudaMemcpy may return once the data is staged, before the DMA lands, and
  // our streams are non-blocking (not ordered after the legacy stream): wait for it, so that work
  // on any stream sees the data (a GPU test's in-place input raced with it once).
  CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
}
void CheckLastError(const char* what) {
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    std::fprintf(stderr, "CUDA error after %s: %s\n", what, cudaGetErrorString(e));
    std::abort();
  }
}
size_t DeviceFreeBytes() {
  size_t free_b = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total));
  return free_b;
}

size_t DeviceTotalBytes() {
  size_t free_b = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total));
  return total;
}

void ProfilerStart() { CUDA_CHECK(cudaProfilerStart()); }
void ProfilerStop() { CUDA_CHECK(cudaProfilerStop()); }

Event::Event() {
  cudaEvent_t e = nullptr;
  CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  event_ = e;
}
Event::~Event() {
  if (event_) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}
void Event::Record(StreamHandle s) { CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event_), s)); }
void Event::Wait(StreamHandle s) const {
  CUDA_CHECK(cudaStreamWaitEvent(s, static_cast<cudaEvent_t>(event_), 0));
}
void Event::Synchronize() const {
  CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)));
}
bool Event::Query() const {
  const cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(event_));
  if (e == cudaErrorNotReady) return false;
  CUDA_CHECK(e);
  return true;
}

Graph::~Graph() {
  if (exec_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_) cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
}
void Graph::BeginCapture(StreamHandle s) {
  CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
}
bool Graph::Capturing(StreamHandle s) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(s, &status));
  return status != cudaStreamCaptureStatusNone;
}
void Graph::EndCapture(StreamHandle s) {
  cudaGraph_t g = nullptr;
  CUDA_CHECK(cudaStreamEndCapture(s, &g));
  graph_ = g;
  cudaGraphExec_t e = nullptr;
  CUDA_CHECK(cudaGraphInstantiate(&e, g, 0));
  exec_ = e;
}
void Graph::Launch(StreamHandle s) const {
  CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), s));
}

EventTimer::EventTimer() {
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  start_ = a;
  stop_ = b;
}
EventTimer::~EventTimer() {
  cudaEventDestroy(static_cast<cudaEvent_t>(start_));
  cudaEventDestroy(static_cast<cudaEvent_t>(stop_));
}
void EventTimer::Start(StreamHandle s) { CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(start_), s)); }
float EventTimer::StopMs(StreamHandle s) {
  CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(stop_), s));
  CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(stop_)));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start_), static_cast<cudaEvent_t>(stop_)));
  return ms;
}

EventLog::~EventLog() {
  for (auto& m : marks_) cudaEventDestroy(static_cast<cudaEvent_t>(m.second));
}
void EventLog::Mark(StreamHandle s, const char* name) {
  cudaEvent_t e;
  CUDA_CHECK(cudaEventCreate(&e));
  CUDA_CHECK(cudaEventRecord(e, s));
  marks_.emplace_back(name, e);
}
std::vector<std::pair<std::string, double>> EventLog::Collect() {
  std::vector<std::pair<std::string, double>> out;
  if (!marks_.empty()) CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(marks_.back().second)));
  for (size_t i = 0; i + 1 < marks_.size(); ++i) {
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(marks_[i].second),
                                    static_cast<cudaEvent_t>(marks_[i + 1].second)));
    auto it = std::find_if(out.begin(), out.end(), [&](auto& x) { return x.first == marks_[i].first; });
    if (it == out.end()) out.emplace_back(marks_[i].first, ms);
    else it->second += ms;
  }
  for (auto& m : marks_) cudaEventDestroy(static_cast<cudaEvent_t>(m.second));
  marks_.clear();
  return out;
}

}  // namespace dsinfer::backend::cuda
