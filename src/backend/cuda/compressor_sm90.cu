#include <string>

#include "backend/cuda/check.cuh"
#include "backend/cuda/compressor.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/fake_quant.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/packed_row.cuh"

namespace dsinfer::backend::cuda {

namespace {

__global__ void AddApeKernel(float* proj, int64_t width, const float* ape, int rate, const int32_t* pos) {
  PdlTrigger();
  PdlWait();
  const int64_t t = blockIdx.x;
  const float* a = ape + static_cast<int64_t>(pos[t] % rate) * width;
  float* g = proj + t * 2 * width + width;
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) g[i] += a[i];
}

constexpr int kMaxSlots = 256;  // 2 * rate (CSA) or rate (HCA)

// The packed entry row of CompressEmitParams::entry_packed.
__host__ __device__ inline qc::PackedRow EntryRow(const CompressEmitParams& p) {
  return {FqKind(p.entry_quant), p.dim - p.entry_bf16_tail, p.entry_block, p.entry_bf16_tail};
}

__global__ void CompressEmitKernel(CompressEmitParams p) {
  PdlTrigger();
  PdlWait();
  extern __shared__ float entry[];  // [dim]
  __shared__ float scratch[32];
  __shared__ const float* row_ptr[kMaxSlots];
  const int64_t t = blockIdx.x;
  const int pos = p.meta.pos[t];
  if ((pos + 1) % p.rate != 0) return;
  const int win = pos / p.rate;
  const int slot = p.meta.slot[t];
  const int seg_start = p.meta.seg_start[t], seg_begin = p.meta.seg_begin[t];
  const int64_t width = p.overlap ? 2 * p.dim : p.dim;
  auto row = [&](int q) -> const float* {  // (the ring only for rows before this call)
    return q >= seg_start ? p.proj + (static_cast<int64_t>(seg_begin) + q - seg_start) * 2 * width
                          : p.rows.Base(slot) + (q % p.rows.cap) * p.rows.width;
  };
  // Slot list: value pointer; the score is at value + width.
  int n_slots = 0;
  if (p.overlap) {
    if (win > 0) {
      for (int j = 0; j < p.rate; ++j) {
        if (threadIdx.x == 0) row_ptr[n_slots] = row(p.rate * (win - 1) + j);
        ++n_slots;
      }
    }
    for (int j = 0; j < p.rate; ++j) {
      if (threadIdx.x == 0) row_ptr[n_slots] = row(p.rate * win + j) + p.dim;
      ++n_slots;
    }
  } else {
    for (int j = 0; j < p.rate; ++j) {
      if (threadIdx.x == 0) row_ptr[n_slots] = row(p.rate * win + j);
      ++n_slots;
    }
  }
  __syncthreads();
  for (int c = threadIdx.x; c < p.dim; c += blockDim.x) {
    float m = -INFINITY;
    for (int s = 0; s < n_slots; ++s) m = fmaxf(m, row_ptr[s][width + c]);
    double sum = 0;
    for (int s = 0; s < n_slots; ++s) sum += expf(row_ptr[s][width + c] - m);
    const float inv = static_cast<float>(1.0 / sum);
    float acc = 0;
    for (int s = 0; s < n_slots; ++s) acc += row_ptr[s][c] * (expf(row_ptr[s][width + c] - m) * inv);
    entry[c] = acc;
  }
  __syncthreads();
  float ss = 0;
  for (int c = threadIdx.x; c < p.dim; c += blockDim.x) ss = fmaf(entry[c], entry[c], ss);
  ss = BlockSum(ss, scratch);
  const float scale = 1.0f / sqrtf(ss / static_cast<float>(p.dim) + p.eps);
  for (int c = threadIdx.x; c < p.dim; c += blockDim.x) entry[c] = p.norm[c] * (entry[c] * scale);
  if (p.latent_out != nullptr) {  // V4.1: the pre-RoPE latent (each thread its own channels)
    for (int c = threadIdx.x; c < p.dim; c += blockDim.x) p.latent_out[t * p.dim + c] = entry[c];
  }
  __syncthreads();
  const int half = p.rope_dim / 2, off = p.dim - p.rope_dim;
  for (int j = threadIdx.x; j < half; j += blockDim.x) {
    RotatePair(entry[off + 2 * j], entry[off + 2 * j + 1], win * p.rate, p.inv_freq[j], false);
  }
  __syncthreads();
  if (p.entry_hadamard) FqHadamardRows(entry, 1, p.dim);  // (synchronizes)
  if (p.entry_packed) {  // encoded with the scales the rounding below would use
    const qc::PackedRow f = EntryRow(p);
    auto* out = reinterpret_cast<uint8_t*>(p.entries.Entry(slot, win));
    for (int b = threadIdx.x; b < f.q / f.block; b += blockDim.x)
      PackBlockSerial(f, entry + b * f.block, b, out);
    for (int c = f.q + threadIdx.x; c < p.dim; c += blockDim.x)
      PackTailValue(f, entry[c], c - f.q, out);
    return;
  }
  if (p.entry_block > 0) {  // onto the grid of the stored entries
    const int q = p.dim - p.entry_bf16_tail;
    FqRowByBlock(entry, q, p.entry_block, p.entry_quant);
    for (int c = q + threadIdx.x; c < p.dim; c += blockDim.x) entry[c] = FqRoundBf16(entry[c]);
    __syncthreads();
  }
  float* out = p.entries.Entry(slot, win);
  for (int c = threadIdx.x; c < p.dim; c += blockDim.x) out[c] = entry[c];
}

// One block per row; the entry in shared memory [dim].
__global__ void IndexKeyEmitKernel(IndexKeyEmitParams p) {
  PdlTrigger();
  PdlWait();
  extern __shared__ float key[];  // [dim]
  __shared__ double scratch[32];
  const int64_t t = blockIdx.x;
  const int pos = p.meta.pos[t];
  if ((pos + 1) % p.rate != 0) return;
  const int w = (pos + 1) / p.rate - 1;
  const float* src = p.keys + t * p.dim;
  double ss = 0.0;
  for (int c = threadIdx.x; c < p.dim; c += blockDim.x) {
    const float v = src[c];
    key[c] = v;
    ss += static_cast<double>(v) * v;
  }
  ss = BlockSum(ss, scratch);
  // As the CPU's RmsNorm: 1 / sqrt(float(ss / dim) + eps), then weight * (x * scale).
  const float scale = __fdiv_rn(
      1.0f, __fsqrt_rn(__fadd_rn(static_cast<float>(ss / static_cast<double>(p.dim)), p.eps)));
  for (int c = threadIdx.x; c < p.dim; c += blockDim.x)
    key[c] = __fmul_rn(p.norm[c], __fmul_rn(key[c], scale));
  __syncthreads();
  const int half = p.rope_dim / 2, off = p.dim - p.rope_dim;
  for (int j = threadIdx.x; j < half; j += blockDim.x) {
    RotatePair(key[off + 2 * j], key[off + 2 * j + 1], w * p.rate, p.inv_freq[j], false);
  }
  __syncthreads();
  if (p.fp4_block > 0) {
    FqRowByBlock(key, p.dim, p.fp4_block, FakeQuant::kFp4Pow2);
    __syncthreads();
  }
  float* out = p.entries.Entry(p.meta.slot[t], w);
  for (int c = threadIdx.x; c < p.dim; c += blockDim.x) out[c] = key[c];
}

__global__ void RingAppendKernel(RingAppendParams p) {
  PdlTrigger();
  PdlWait();
  const int64_t t = blockIdx.x;
  const int pos = p.meta.pos[t];
  if (pos < p.meta.seg_start[t] + p.meta.seg_count[t] - p.ring.cap) return;
  float* dst = p.ring.Row(p.meta.slot[t], pos);
  const float* src = p.src + t * p.ld;
  for (int64_t i = threadIdx.x; i < p.ring.width; i += blockDim.x) dst[i] = src[i];
}

}  // namespace

Status CompressEmitParams::Validate() const {
  if (rate <= 0 || (overlap ? 2 * rate : rate) > kMaxSlots) {
    return Unimplemented("compressor: rate " + std::to_string(rate) +
                         (overlap ? " (overlapping)" : "") + ": the kernel takes up to " +
                         std::to_string(kMaxSlots) + " rows per entry");
  }
  if (entry_block < 0 || entry_bf16_tail < 0 || entry_bf16_tail > dim) {
    return InvalidArgument("compressor: entry_block < 0 or entry_bf16_tail outside [0, dim]");
  }
  if (entry_packed) {
    const qc::PackedRow f = EntryRow(*this);
    if (entry_quant == FakeQuant::kBf16 || f.block <= 0 || f.block % 2 != 0 || f.q <= 0 ||
        f.q % f.block != 0 || f.q % 8 != 0 || entries.width < f.floats()) {
      return InvalidArgument(
          "compressor: a packed entry needs FP8/FP4 blocks (even) dividing dim - "
          "entry_bf16_tail (a multiple of 8) and entries a packed row wide");
    }
  }
  return Status::Ok();
}

Status IndexKeyEmitParams::Validate() const {
  if (rate < 1 || dim < 1 || rope_dim < 0 || rope_dim % 2 != 0 || rope_dim > dim || fp4_block < 0) {
    return InvalidArgument("index keys: rate " + std::to_string(rate) + ", dim " +
                           std::to_string(dim) + ", rope_dim " + std::to_string(rope_dim) +
                           ", fp4_block " + std::to_string(fp4_block));
  }
  return Status::Ok();
}

void LaunchIndexKeyEmit(const IndexKeyEmitParams& p, StreamHandle stream) {
  if (p.meta.n <= 0) return;
  DSINFER_CHECK_PARAMS(p);
  LaunchKernel(IndexKeyEmitKernel, dim3(static_cast<unsigned>(p.meta.n)), dim3(128),
               p.dim * sizeof(float), stream, p);
  CUDA_CHECK_LAUNCH();
}

void LaunchAddApe(float* proj, int64_t n, int64_t width, const float* ape, int rate,
                  const int32_t* pos, StreamHandle stream) {
  if (n <= 0) return;
  LaunchKernel(AddApeKernel, dim3(static_cast<unsigned>(n)), dim3(256), 0, stream, proj, width, ape, rate, pos);
  CUDA_CHECK_LAUNCH();
}

void LaunchCompressEmit(const CompressEmitParams& p, StreamHandle stream) {
  if (p.meta.n <= 0) return;
  DSINFER_CHECK_PARAMS(p);
  LaunchKernel(CompressEmitKernel, dim3(static_cast<unsigned>(p.meta.n)), dim3(256), p.dim * sizeof(float), stream, p);
  CUDA_CHECK_LAUNCH();
}

void LaunchRingAppend(const RingAppendParams& p, StreamHandle stream) {
  if (p.meta.n <= 0) return;
  LaunchKernel(RingAppendKernel, dim3(static_cast<unsigned>(p.meta.n)), dim3(256), 0, stream, p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::backend::cuda
