// DeepSeek-V4.1's Engram n-gram memory on the device (the CPU reference, which the layering keeps
// out of reach of this folder: model/deepseek_v41/engram.{h,cc}, EngramHasher::Hash and
// EngramForward):
//   LaunchEngramHash:   every row's hash ids [layers, cols] from its token and the max_ngram - 1
//                       before it (this call's ids from seg_start on, earlier ones from the token
//                       ring; the pad id before position 0), exact int64 arithmetic as the CPU.
//   LaunchEngramGather: the table rows of one layer's hash ids, dequantized (EngramTable::Row).
//   LaunchEngramGate:   each hc stream h += sigmoid(signed_sqrt(<h, qk · key> · rstd_h · rstd_k /
//                       sqrt(D))) · value, the sums in double as the CPU (a fixed-order block
//                       reduction: a row's bits do not depend on n), the add in two roundings.
// The wkv projection between gather and gate is an ordinary linear (kv = rows · wkvᵀ).
#pragma once

#include <cstdint>

#include "backend/cuda/runtime.h"
#include "backend/cuda/token_meta.cuh"
#include "base/status.h"

namespace dsinfer::backend::cuda {

struct EngramHashParams {
  TokenMeta meta;  // ids of this call's rows (positions, slot, seg_begin / seg_start)
  RingRef tokens;  // earlier token ids by position (int32 bits stored in the float ring, width 1;
                   // must hold positions >= seg_start - (max_ngram - 1) of each request)
  const int32_t* token_map = nullptr;  // [vocab] compressed id of each token id
  int64_t vocab = 0;   // token_map's size: an id outside [0, vocab) (a corrupt ring row) hashes
                       // as the pad id instead of reading past the map
  int64_t pad_id = 0;  // the compressed id before the sequence start
  int max_ngram = 0, n_heads = 0, layers = 0;
  const int64_t* multipliers = nullptr;  // [layers, max_ngram]
  const int64_t* primes = nullptr;       // [layers, cols]
  const int64_t* offsets = nullptr;      // [layers, cols]
  int64_t* hash_ids = nullptr;           // out [n, layers, cols], cols = (max_ngram - 1) * n_heads
  Status Validate() const;
};
void LaunchEngramHash(const EngramHashParams& p, StreamHandle stream);

struct EngramGatherParams {
  const int64_t* hash_ids = nullptr;  // this layer's columns of row t at hash_ids + t * hash_stride
  int64_t hash_stride = 0;
  int cols = 0;
  int64_t dim = 0;  // engram_head_dim
  // 0: fp32 rows; 1: bf16 rows; 2: e4m3 rows times one fp32 scale per 32 values of the row
  // (scale [rows, dim / 32]). The checkpoint's F8_E8M0 / BF16 scales convert to fp32 exactly: the
  // loader converts them once (EngramTable::Row's value is e4m3 * scale, one rounding).
  const void* table = nullptr;
  int table_format = 0;
  const float* scale = nullptr;
  int64_t n = 0;
  float* out = nullptr;  // [n, cols * dim]
  Status Validate() const;
};
void LaunchEngramGather(const EngramGatherParams& p, StreamHandle stream);

struct EngramGateParams {
  const float* kv = nullptr;         // [n, (hc + 1) * D]: hc keys then the value (wkv's output)
  const float* qk_weight = nullptr;  // [hc, D] (q_weight * k_weight)
  float* X = nullptr;                // [n, hc, D] in/out
  int64_t n = 0;
  int hc = 0;
  int64_t D = 0;
  float eps = 1e-6f;
  Status Validate() const;
};
void LaunchEngramGate(const EngramGateParams& p, StreamHandle stream);

}  // namespace dsinfer::backend::cuda
