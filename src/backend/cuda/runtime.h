// The CUDA runtime as the rest of dsinfer sees it: device buffers, a stream, events, CUDA graphs and
// copies, behind a header with no CUDA types (only backend/cuda includes CUDA headers; STYLE.md).
// Every call checks its CUDA status and aborts with file:line on failure (CUDA_CHECK policy):
// CUDA errors are our bugs or a broken device, never user input.
// Not thread-safe; one engine thread owns a Stream and everything launched on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

struct CUstream_st;  // the CUDA runtime's stream type (cudaStream_t = CUstream_st*)

namespace dsinfer::backend::cuda {

// Opaque cudaStream_t.
using StreamHandle = ::CUstream_st*;

// True when a CUDA device is usable (tests skip otherwise).
bool DeviceAvailable();
// The current device's streaming multiprocessors (queried once).
int SmCount();
// "NVIDIA H200, 132 SMs, CC 9.0" (empty without a device).
std::string DeviceDescription();
// Kernel-variant choices of the process, none of which changes a result (every choice gives the
// same bits; the GPU tests check it) except attention_tc: A/B timing and tests. They are
// set once at the edge (the CLI's flags, the bench and test mains) before the first launch, and
// read by the launchers: a process setting of this runtime like cudaSetDeviceFlags, not state that
// changes while kernels run. The defaults are the measured best (docs/perf.md).
struct KernelOptions {
  bool pdl = true;        // programmatic dependent launch (launch.cuh); off: plain stream order
  bool gemv_f32 = true;   // the decode GEMV for fp32 weights (off: the general kernel)
  bool gemv_bf16 = true;  // the decode GEMV for bf16 weights
  bool gemv_dual = true;  // the fused SwiGLU pair in the decode GEMV (off: two GEMVs + SwiGLU)
  int qlinear_warps = 0;  // warps per FP8/FP4 block for few rows (1..16); 0: chosen by shape
  // Dense FP8 linears of at least this many rows take the tiled GEMM (qgemm_sm90.cu /
  // qgemm_wg_sm90.cu; the same bits as the decode kernel; 0: off). 128: measured on an H200 with
  // the warpgroup-MMA kernel (docs/perf.md, session 27): flash-l8 decode batch 256 31.27 -> 28.27
  // ms, batch 128 18.79 -> 18.46; from 64 rows it loses (batch 64 12.18 -> 13.63 ms: its 128 x
  // 128 tiles leave most SMs idle). (With session 17's mma.sync kernel the cut was 512.)
  int64_t qgemm_min_rows = 128;
  // The FP8-instruction mode's routed experts at many rows an expert on the warp-specialized
  // gather tile (fp8mma_linear_sm90.cu; the same bits; off: the gather tile). Measured on an
  // H100 (docs/perf.md, session 40): flash-l8's 8,192-token prefill experts 142.6 -> 125.9 ms.
  bool fp8mma_ws_experts = true;
  // That tile's tokens fed by the TMA, the pairs' rows gathered into list order first (the same
  // bits; off: the producer warpgroup's cp.async). Measured on an H100 (docs/perf.md, session
  // 56): expert_w1 / w2 2,651 / 3,116 -> 2,463 / 2,927 us, flash-l8's 8,192-token prefill
  // experts 70.6 -> 67.2 ms.
  bool fp8mma_tma_experts = true;
  // That tile's tokens 192 a tile instead of 128 for FP4 weights where the expected pairs a slot
  // pass 128 (an expert's pairs up to 192 in one tile, so its weights are converted once for
  // them; 3 ring stages, the running totals in shared memory; the same bits; off: 128). Measured on
  // an H100 (docs/perf.md, session 58): expert_w1 / w2 2,447 / 2,928 -> 2,334 / 2,754 us,
  // flash-l8's 8,192-token prefill experts 62.1 -> 60.2 ms.
  bool fp8mma_wide_experts = true;
  // Routed experts (FP8 or FP4) whose expected rows per expert slot reach this take the tiled
  // GEMM (0: off). Measured on an H200 (docs/perf.md, session 18): routed experts of a prefill
  // at 24 rows per expert 46.6 -> 50.1 ms (loses), 36 rows 64.1 -> 62.2 (gains), 48 rows
  // 78.4 -> 73.3, 192 rows (8,192 tokens) 260 -> 227.
  int64_t qgemm_expert_min_rows = 32;
  // The tiled GEMM on warpgroup MMA (wgmma; qgemm_wg_sm90.cu) instead of mma.sync (qgemm_sm90.cu):
  // the same bits (each k16 step rounds alike, bench/probe_wgmma_bits.cu). Measured on an H200
  // (docs/perf.md, session 24): 8,192-token prefill routed experts 223.8 -> 119.1 ms, the whole
  // prefill 0.739 -> 0.620 s.
  bool qgemm_wgmma = true;
  // The dense warp-specialized GEMM's pre-pass writes the act_quant scales transposed, so a tile's
  // scales of a pair are one 512-byte bulk copy instead of 128 four-byte copies (a sector each;
  // the same bits). Measured on an H200 (docs/perf.md, session 32): bench_qgemm 8,192 tokens
  // wo_b 1,832 -> 1,705 us, wo_a 2,242 -> 2,113, wq_b 1,970 -> 1,900.
  bool qgemm_ws_scales_t = true;
  // Routed FP4 experts' w2 at decode sizes (rows quantized by the caller, at most 8 expected rows
  // per expert) over at least this many expert slots take the row-tile kernel (QExpertRowsKernel:
  // a warp per 16 weight rows over all of k, activations shared through L1; the same bits; 0:
  // off). Measured on an H200 (docs/perf.md, session 27): flash-l8 decode batch 32 / 128 / 256
  // 8.79 -> 8.45, 19.18 -> 18.81, 31.79 -> 31.21 ms; at 6 slots (batch 1) it loses.
  int qexpert_rows_min_slots = 64;
  // Sparse attention heads per block (1, 2, 4; 0: 4 from attention_group_min_rows rows, else 1).
  // Measured on an H200: 8,192-token prefill attention 386 -> 240 ms, decode batch 128 41.4 ->
  // 38.9 ms; decode batch 1 keeps a block per head (its 64 blocks fill more SMs).
  int attention_heads_per_block = 0;
  int64_t attention_group_min_rows = 64;
  // The FP8 cache's unsplit tensor-core attention takes the row block (one block per row for its
  // 64 heads; SparseAttentionParams::tc_row; the same bits) from this many rows (0: off).
  // Measured on an H200 (docs/perf.md, session 33; bench_attention, CSA): 8,192-token prefill
  // 15.7 -> 10.3 ms, 256 rows 575 -> 374 us, 128 rows 294 -> 194; at 64 rows it loses (149 ->
  // 187 us: 64 blocks on 132 SMs).
  int64_t attention_tc_row_min_rows = 128;
  // The row block's P V on warpgroup MMA (m64n64k16, A the P fragments in registers, B the
  // chunk's swizzled keys read N-major) instead of mma.sync with ldmatrix: the same chains, so
  // the same bits (bench/probe_wgmma_bits: wgmma_t_vs_mma). On: CSA at 8,192 rows 8,861 -> 8,232
  // us, 256 rows 329 -> 307 (docs/perf.md session 36); false (--attention-row-pv sync): mma.sync.
  bool attention_row_pv_wgmma = true;
  // The row block's key pre-pass (LaunchRowKeysDecode, SparseAttentionParams::keys16): a forward
  // whose sequences all start at position 0 (a first prefill chunk; not while a graph is being
  // captured) decodes its K=V rows and compressed entries once, into bf16 rows in S's order, and
  // the row block copies its keys from them instead of decoding each chunk's packed rows per row
  // (the same bits). Measured on an H100 (docs/perf.md, session 60): the 8,192-token prefill's
  // SWA / CSA / HCA attention 2,233.6 / 6,455.1 / 2,633.4 -> 1,844.0 / 4,708.5 / 2,141.6 us with
  // the pre-pass, the mode's prefill 0.157 -> 0.149 s; off until the GPU suite has run with it on
  // (--attention-row-prepass).
  bool attention_row_prepass = false;
  // Sparse attention on the tensor cores (LaunchSparseAttentionTc, issue 27) where the shapes
  // allow: batch-invariant like the CUDA-core kernel but not its bits (about 1e-6 of the output's
  // scale apart), so not a free choice like those above. kAuto: on where the K=V values are bf16
  // values (SparseAttentionParams::kv_bf16: the kernel runs 3 mma per step instead of 6: measured
  // in docs/perf.md, session 26), else off; kOn (--attention-tc) / kOff (--no-attention-tc):
  // everywhere, except DeepSeek-V4's FP8 cache, whose bf16 queries and weights (qp_bf16, one mma
  // per step: session 29) only the tensor-core kernel computes.
  enum class AttentionTc { kAuto, kOn, kOff };
  AttentionTc attention_tc = AttentionTc::kAuto;
  // DeepSeek-V4's FP8 cache: indexer chunks of at least this many tokens score on the tensor
  // cores where the shapes allow (IndexerTopKParams::tensor_core_min_rows; the same bits as the
  // CUDA cores; 0: off). Measured on an H200 (docs/perf.md, session 30), flash-l8: 8,192-token
  // prefill indexer 26.3 -> 8.7 ms; decode batch 1 / 4 / 32 at 128K contexts 2.102 -> 1.922,
  // 3.843 -> 3.057, 12.00 -> 9.96 ms; at 4K contexts batch 1 1.623 vs 1.630 ms (the CUDA cores'
  // 8-entry tiles spread one token over more SMs: within 0.5%), batch 4 2.557 -> 2.530.
  int64_t indexer_tc_min_rows = 1;
  // Whether the tensor-core attention runs for a call whose K=V values are (kv_bf16) bf16 values.
  bool AttentionTcFor(bool kv_bf16) const {
    return attention_tc == AttentionTc::kOn || (attention_tc == AttentionTc::kAuto && kv_bf16);
  }
};
// Before the first launch (DSINFER_CHECKs that none has happened yet).
void SetKernelOptions(const KernelOptions& options);
const KernelOptions& GetKernelOptions();
// Each kernel's shared-memory carveout preference (set on its launches, never lowered): just the
// shared memory of the blocks of its largest launch shape so far that fit an SM, the rest of the
// unified L1 / shared memory as L1. Without a preference the driver may run a kernel in the split
// an earlier kernel left (H200, flash-l8 decode: the head's GEMV, which needs no shared memory,
// ran with a small L1). Never changes a result.
void AutoCarveout(const void* kernel, unsigned threads, size_t dyn_smem);

enum class MemoryKind { kDevice, kPinnedHost };

// Owning allocation: device memory (cudaMalloc) or page-locked host memory (cudaMallocHost, for
// copies a CUDA graph replays). Move-only.
template <MemoryKind K>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes);  // aborts when the memory cannot be had
  // The same, or an empty buffer (get() == nullptr) when the memory cannot be had (a pinned host
  // allocation the OS refuses): for callers that can do without.
  static Buffer TryAllocate(size_t bytes);
  ~Buffer() { Release(); }
  Buffer(Buffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; o.bytes_ = 0; }
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      Release();
      ptr_ = o.ptr_;
      bytes_ = o.bytes_;
      o.ptr_ = nullptr;
      o.bytes_ = 0;
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* get() const { return ptr_; }
  template <typename T> T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void Release();  // frees ptr_ (if any)
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

using DeviceBuffer = Buffer<MemoryKind::kDevice>;
using PinnedBuffer = Buffer<MemoryKind::kPinnedHost>;

class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  StreamHandle get() const { return stream_; }
  void Synchronize() const;

 private:
  StreamHandle stream_ = nullptr;
};

// Waits for everything enqueued on a stream (one the caller does not own as a Stream).
void SynchronizeStream(StreamHandle stream);
void CopyToDevice(void* dst, const void* src, size_t bytes, StreamHandle stream);
void CopyToHost(void* dst, const void* src, size_t bytes, StreamHandle stream);
void CopyDeviceToDevice(void* dst, const void* src, size_t bytes, StreamHandle stream);
void Memset(void* dst, int value, size_t bytes, StreamHandle stream);
// Synchronous copy of host memory that need not be pinned (weight upload).
void CopyToDeviceSync(void* dst, const void* src, size_t bytes);
// Aborts with the pending CUDA error, if any (call after launches in debug paths and tests).
void CheckLastError(const char* what);
size_t DeviceFreeBytes();
size_t DeviceTotalBytes();
// Brackets work for a profiler started with --profile-from-start off (ncu, nsys).
void ProfilerStart();
void ProfilerStop();

// Cross-stream ordering (cudaEvent without timing): Record marks the current end of a stream,
// Wait makes another stream's later work wait for it. Both are captured into CUDA graphs.
class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void Record(StreamHandle stream);
  void Wait(StreamHandle stream) const;
  // Blocks the host until the work recorded has run (at once when nothing was recorded).
  void Synchronize() const;
  // Whether the work recorded has run (true when nothing was recorded); never blocks.
  bool Query() const;

 private:
  void* event_ = nullptr;  // cudaEvent_t
};

// A captured sequence of launches on a stream, replayed as one graph launch.
class Graph {
 public:
  Graph() = default;
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  void BeginCapture(StreamHandle stream);
  void EndCapture(StreamHandle stream);
  // Whether `stream` is being captured now (into any graph: its launches would be replayed).
  static bool Capturing(StreamHandle stream);
  void Launch(StreamHandle stream) const;
  bool ready() const { return exec_ != nullptr; }

 private:
  void* graph_ = nullptr;  // cudaGraph_t
  void* exec_ = nullptr;   // cudaGraphExec_t
};

// Device-time stopwatch on a stream (cudaEvent pair).
class EventTimer {
 public:
  EventTimer();
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void Start(StreamHandle stream);
  // Milliseconds since Start (synchronizes on the stop event).
  float StopMs(StreamHandle stream);

 private:
  void* start_ = nullptr;
  void* stop_ = nullptr;
};

// Named device-time marks on a stream for a per-op breakdown (eager runs only, not in graphs):
// the time between a mark and the next is charged to the earlier mark's name.
class EventLog {
 public:
  EventLog() = default;
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;
  void Mark(StreamHandle stream, const char* name);
  // Synchronizes; returns (name, total ms) in first-seen order and clears the log.
  std::vector<std::pair<std::string, double>> Collect();

 private:
  std::vector<std::pair<const char*, void*>> marks_;
};

}  // namespace dsinfer::backend::cuda
