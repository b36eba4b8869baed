#include <cuda_fp8.h>

#include "backend/cuda/check.cuh"
#include "backend/cuda/packed_row.cuh"
#include "backend/cuda/random_fill.cuh"

namespace dsinfer::backend::cuda {

namespace {

__device__ inline uint64_t Hash(uint64_t seed, uint64_t i) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + i * 0xd1b54a32d192ed03ull + 0x632be59bd9b4e019ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Approximately N(0,1): sum of 4 uniforms, centred and scaled.
__device__ inline float Normalish(uint64_t h) {
  float s = 0;
  for (int i = 0; i < 4; ++i) s += static_cast<float>((h >> (16 * i)) & 0xFFFF) * (1.0f / 65536.0f);
  return (s - 2.0f) * 1.7320508f;
}

__global__ void __launch_bounds__(256) ReadProbeKernel(const uint4* p, int64_t n, uint32_t* out) {
  uint32_t acc = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = __ldcs(p + i), b = __ldcs(p + i + stride), c = __ldcs(p + i + 2 * stride),
                d = __ldcs(p + i + 3 * stride);
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^
           d.w;
  }
  for (; i < n; i += stride) {
    const uint4 a = __ldcs(p + i);
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  if (acc == 0x9e3779b9u) *out = acc;  // practically never; keeps the loads
}

// Block r: row r; thread b < blocks encodes block b, the others the tail values.
__global__ void RandomPackedRowsKernel(RandomPackedRowsParams p) {
  const int64_t r = blockIdx.x;
  const qc::PackedRow& f = p.format;
  auto* row = reinterpret_cast<uint8_t*>(p.data + (r / p.rows_per_page) * p.page_floats +
                                         (r % p.rows_per_page) * p.row_floats);
  const int n = f.q + f.tail, blocks = f.q / f.block;
  auto value = [&](int i) {
    return p.std * Normalish(Hash(p.seed, static_cast<uint64_t>(r) * n + i));
  };
  for (int b = threadIdx.x; b < blocks; b += blockDim.x) {
    float x[64];
    for (int i = 0; i < f.block; ++i) x[i] = value(b * f.block + i);
    PackBlockSerial(f, x, b, row);
  }
  for (int j = threadIdx.x; j < f.tail; j += blockDim.x) PackTailValue(f, value(f.q + j), j, row);
}

__global__ void RandomFillKernel(RandomFillParams p) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < p.count; i += int64_t{gridDim.x} * blockDim.x) {
    const uint64_t h = Hash(p.seed, static_cast<uint64_t>(i));
    switch (p.kind) {
      case RandomKind::kF32Normal:
        static_cast<float*>(p.data)[i] = p.mean + p.std * Normalish(h);
        break;
      case RandomKind::kBf16Normal: {
        const float v = p.mean + p.std * Normalish(h);
        static_cast<uint16_t*>(p.data)[i] = static_cast<uint16_t>(__float_as_uint(v) >> 16);
        break;
      }
      case RandomKind::kFp8: {
        // A value in [-448, 448] * std, quantized to e4m3.
        const float v = Normalish(h) * p.std;
        static_cast<uint8_t*>(p.data)[i] = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
        break;
      }
      case RandomKind::kFp4:
        static_cast<uint8_t*>(p.data)[i] = static_cast<uint8_t>(h & 0xFF);
        break;
      case RandomKind::kByte:
        static_cast<uint8_t*>(p.data)[i] = static_cast<uint8_t>(p.mean);
        break;
    }
  }
}

}  // namespace

void LaunchRandomFill(const RandomFillParams& p, StreamHandle stream) {
  if (p.count <= 0) return;
  const int64_t blocks = std::min<int64_t>((p.count + 255) / 256, 8192);
  RandomFillKernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

void LaunchReadProbe(const void* data, int64_t bytes, uint32_t* out, StreamHandle stream) {
  ReadProbeKernel<<<4 * SmCount(), 256, 0, stream>>>(static_cast<const uint4*>(data), bytes / 16,
                                                     out);
  CUDA_CHECK_LAUNCH();
}

void LaunchRandomPackedRows(const RandomPackedRowsParams& p, StreamHandle stream) {
  DSINFER_CHECK(p.format.packed() && p.format.block <= 64 && p.row_floats >= p.format.floats());
  if (p.rows <= 0) return;
  RandomPackedRowsKernel<<<static_cast<unsigned>(p.rows), 64, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::backend::cuda
