#include "backend/cpu/gemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/dtype.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define DSINFER_GEMM_AVX2 1
#endif

namespace dsinfer::backend::cpu {

namespace {

#if DSINFER_GEMM_AVX2
inline float Reduce8(__m256 v) {
  // Fixed order: (lane i + lane i+4), then pairs, then the last pair.
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  __m128 s = _mm_add_ps(lo, hi);
  __m128 sh = _mm_movehl_ps(s, s);
  s = _mm_add_ps(s, sh);
  sh = _mm_shuffle_ps(s, s, 1);
  return _mm_cvtss_f32(_mm_add_ss(s, sh));
}

inline __m256 Load8(const float* w) { return _mm256_loadu_ps(w); }
inline __m256 Load8(const uint16_t* w) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
#endif

inline float Scalar(const float* w, int64_t i) { return w[i]; }
inline float Scalar(const uint16_t* w, int64_t i) {
  const uint32_t bits = static_cast<uint32_t>(w[i]) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

#if DSINFER_GEMM_AVX2
// R rows of x against C rows of w over the full k.
template <int R, int C, typename W>
inline void Tile(const float* x, int64_t ldx, const W* w, int64_t k, float* y, int64_t ldy) {
  __m256 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
  const int64_t k8 = k & ~int64_t{7};
  for (int64_t i = 0; i < k8; i += 8) {
    if (R == 1 && (i & 15) == 0) {  // decode (single row) streams weights: prefetch the next tile's
      for (int c = 0; c < C; ++c)
        _mm_prefetch(reinterpret_cast<const char*>(w + (C + c) * k + i), _MM_HINT_T0);
    }
    __m256 wv[C];
    for (int c = 0; c < C; ++c) wv[c] = Load8(w + c * k + i);
    for (int r = 0; r < R; ++r) {
      __m256 xv = _mm256_loadu_ps(x + r * ldx + i);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm256_fmadd_ps(xv, wv[c], acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) {
      float s = Reduce8(acc[r][c]);
      // Explicit fma: the tail's rounding must not depend on the compiler's contraction choice.
      for (int64_t i = k8; i < k; ++i) s = std::fma(x[r * ldx + i], Scalar(w, c * k + i), s);
      y[r * ldy + c] = s;
    }
  }
}
#else
template <int R, int C, typename W>
inline void Tile(const float* x, int64_t ldx, const W* w, int64_t k, float* y, int64_t ldy) {
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) {
      float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      const int64_t k8 = k & ~int64_t{7};
      for (int64_t i = 0; i < k8; i += 8)
        for (int l = 0; l < 8; ++l)
          lanes[l] = std::fma(x[r * ldx + i + l], Scalar(w, c * k + i + l), lanes[l]);
      float s = ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) +
                ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
      for (int64_t i = k8; i < k; ++i) s = std::fma(x[r * ldx + i], Scalar(w, c * k + i), s);
      y[r * ldy + c] = s;
    }
  }
}
#endif

// Rows [0, m) x columns [n0, n1).
template <typename W>
void GemmColumns(const float* x, int64_t m, int64_t k, int64_t ldx, const W* w, int64_t n0,
                 int64_t n1, float* y, int64_t ldy) {
  constexpr int kR = 4, kC = 3;
  // Column blocks small enough that their weights stay in L2 while all rows stream past.
  const int64_t block =
      std::max<int64_t>(2 * kC, (256 * 1024 / 4) / std::max<int64_t>(k, 1) / (2 * kC) * (2 * kC));
  for (int64_t nb = n0; nb < n1; nb += block) {
    const int64_t ne = std::min(n1, nb + block);
    int64_t r = 0;
    for (; r + kR <= m; r += kR) {
      int64_t c = nb;
      for (; c + kC <= ne; c += kC)
        Tile<kR, kC>(x + r * ldx, ldx, w + c * k, k, y + r * ldy + c, ldy);
      for (; c < ne; ++c) Tile<kR, 1>(x + r * ldx, ldx, w + c * k, k, y + r * ldy + c, ldy);
    }
    for (; r < m; ++r) {  // single rows (decode): 6 independent accumulator chains
      int64_t c = nb;
      for (; c + 2 * kC <= ne; c += 2 * kC)
        Tile<1, 2 * kC>(x + r * ldx, ldx, w + c * k, k, y + r * ldy + c, ldy);
      for (; c + kC <= ne; c += kC)
        Tile<1, kC>(x + r * ldx, ldx, w + c * k, k, y + r * ldy + c, ldy);
      for (; c < ne; ++c) Tile<1, 1>(x + r * ldx, ldx, w + c * k, k, y + r * ldy + c, ldy);
    }
  }
}

}  // namespace

float Dot(const float* a, const float* b, int64_t k) {
  float out;
  Tile<1, 1>(a, k, b, k, &out, 1);
  return out;
}

template <typename W>
void GemmTyped(const float* x, int64_t m, int64_t k, int64_t ldx, const W* w, int64_t n, float* y,
               int64_t ldy, ThreadPool* pool) {
  const int64_t work = m * n * k;
  if (!pool || pool->size() == 1 || work < (1 << 16)) {
    GemmColumns(x, m, k, ldx, w, 0, n, y, ldy);
    return;
  }
  // Split columns across threads in multiples of 6 (the widest tile). The split never changes a
  // result: every element is reduced in the same order whatever tile computes it.
  const int64_t units = (n + 5) / 6;
  pool->ParallelFor(units, [&](int64_t b, int64_t e) {
    GemmColumns(x, m, k, ldx, w, b * 6, std::min(n, e * 6), y, ldy);
  });
}

void ActQuantRow(const float* x, int64_t k, float* out) {
  uint8_t codes[kActQuantBlock];
  for (int64_t b = 0; b < k; b += kActQuantBlock) {
    const int64_t len = std::min<int64_t>(kActQuantBlock, k - b);
    float s;
    ActQuantCodes(x + b, len, codes, &s);
    for (int64_t i = 0; i < len; ++i) out[b + i] = E4M3ToFloat(codes[i]) * s;
  }
}

void ActQuantCodes(const float* x, int64_t k, uint8_t* codes, float* scales) {
  for (int64_t b = 0; b < k; b += kActQuantBlock) {
    const int64_t e = std::min<int64_t>(k, b + kActQuantBlock);
    float amax = 0.0f;
    for (int64_t i = b; i < e; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float s = E8M0ToFloat(Ue8m0ScaleFor(amax, 448.0f, 1e-4f)), inv = 1.0f / s;  // exact
    scales[b / kActQuantBlock] = s;
    for (int64_t i = b; i < e; ++i) codes[i] = FloatToE4M3(x[i] * inv);
  }
}

void Fp8MmaGemm(const fp8mma::Operand& x, int64_t m, const fp8mma::Operand& w, int64_t n, float* y,
                int64_t ldy, ThreadPool* pool) {
  auto rows = [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) y[(t / n) * ldy + t % n] = fp8mma::Dot(x, t / n, w, t % n);
  };
  if (pool == nullptr || pool->size() == 1) {
    rows(0, m * n);
  } else {
    pool->ParallelFor(m * n, rows);
  }
}

void Gemm(const float* x, int64_t m, int64_t k, int64_t ldx, WeightView w, int64_t n, float* y,
          int64_t ldy, ThreadPool* pool) {
  if (m <= 0 || n <= 0) return;
  if (w.mma.e4m3 != nullptr) {  // the FP8-instruction mode: the input as act_quant's codes
    const int64_t nb = (k + kActQuantBlock - 1) / kActQuantBlock;
    std::vector<uint8_t> codes(static_cast<size_t>(m * k));
    std::vector<float> scales(static_cast<size_t>(m * nb));
    for (int64_t i = 0; i < m; ++i)
      ActQuantCodes(x + i * ldx, k, codes.data() + i * k, scales.data() + i * nb);
    Fp8MmaGemm({codes.data(), scales.data(), k, 1, kActQuantBlock}, m, w.mma, n, y, ldy, pool);
    return;
  }
  if (w.act_quant) {
    std::vector<float> xq(static_cast<size_t>(m * k));
    for (int64_t i = 0; i < m; ++i) ActQuantRow(x + i * ldx, k, xq.data() + i * k);
    w.act_quant = false;
    Gemm(xq.data(), m, k, k, w, n, y, ldy, pool);
    return;
  }
  if (w.bf16) {
    GemmTyped(x, m, k, ldx, w.bf16, n, y, ldy, pool);
  } else {
    GemmTyped(x, m, k, ldx, w.f32, n, y, ldy, pool);
  }
}

}  // namespace dsinfer::backend::cpu
