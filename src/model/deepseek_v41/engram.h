// The Engram n-gram memory of DeepSeek-V4.1 (reference: transformers `modeling_deepseek_v41.py`,
// `DeepseekV41NgramHashState`, `EngramLayout`, `DeepseekV41EngramEmbedding`, `DeepseekV41Engram`;
// docs/architecture.md "DeepSeek-V4.1"). Once per forward every token row is hashed: its token and
// the N-1 before it (N = engram_max_ngram_size) go through the compressed token map, each
// (layer, look-back k) multiplies its id by an odd per-layer constant, and the XOR of the first
// n+1 products, modulo each of the n-gram size's `engram_n_heads` primes, picks one row of the
// layer's table per (n-gram, head). At an Engram layer, before the block, the rows are projected
// by `wkv` to one key per hc stream plus one value, and each stream gains
// sigmoid(signed_sqrt(<stream, q·k·key> / rms / rms / sqrt(D))) × value.
// The look-back is the sequence's own tokens: the model keeps the last N-1+slack of them in the
// sequence state (state.h), so every prefill / decode schedule hashes the same n-grams. The
// tables stay in the checkpoint's mapping (one row gather per hash id, dequantized on lookup: F32,
// BF16, or F8_E4M3 with a scale per 32 channels). Immutable after loading; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "io/deepseek_v41_config.h"
#include "io/safetensors.h"
#include "model/deepseek_v4/weights.h"

namespace dsinfer::model::deepseek_v41 {

// The bucket layout and hash constants of every Engram layer (EngramLayout + the hash state's
// derived tensors). Column c of a layer is (n-gram size c / heads + 2, head c % heads).
struct EngramHasher {
  int max_ngram = 0;  // N: n-grams of 2..N tokens (a look-back of N-1)
  int n_heads = 0;
  std::vector<int> layer_ids;                     // [L]
  std::vector<std::vector<int64_t>> primes;       // [L][cols] bucket count of each column
  std::vector<std::vector<int64_t>> offsets;      // [L][cols] first row of each column's range
  std::vector<std::vector<int64_t>> multipliers;  // [L][N] per look-back
  std::vector<int32_t> token_map;                 // [vocab] compressed id of each token
  int64_t pad_id = 0;  // the compressed id standing in before the sequence start

  int cols() const { return (max_ngram - 1) * n_heads; }
  int layers() const { return static_cast<int>(layer_ids.size()); }
  // Index of `layer` in layer_ids, or -1.
  int IndexOf(int layer) const;
  // The hash ids [L, cols] of a position from its tokens back[0..N) (back[k]: the token k
  // positions before, -1 before the sequence start).
  void Hash(const int32_t* back, int64_t* out) const;

  // From the config and the compressed token map (`token_map[id]` < compressed vocab size).
  static StatusOr<EngramHasher> Build(const io::DeepseekV41Config& config,
                                      std::vector<int32_t> token_map);
};

// The bucket counts of every layer's columns: primes drawn in order above engram_vocab_size - 1,
// never reused (EngramLayout.from_config).
std::vector<std::vector<int64_t>> EngramPrimes(const io::DeepseekV41Config& config);
// The rows of each layer's table the hash can address (the sum of its primes).
std::vector<int64_t> EngramRowsNeeded(const io::DeepseekV41Config& config);
// The reference's per-layer multipliers: numpy `default_rng(10007 * layer_id).integers(0,
// bound, N)` * 2 + 1 with bound = (INT64_MAX // compressed_vocab_size) // 2 (PCG64 seeded by
// SeedSequence, Lemire's bounded draw), replicated exactly.
std::vector<int64_t> EngramHashMultipliers(int layer_id, int max_ngram,
                                           int64_t compressed_vocab_size);

// numpy's generator under EngramHashMultipliers, exposed for its tests against numpy's documented
// values: the first `count` raw 64-bit draws of default_rng(seed)'s PCG64 (SeedSequence-seeded),
// and default_rng(seed).integers(0, high, count) (Lemire's bounded draws, 32- or 64-bit).
std::vector<uint64_t> NumpyPcg64Raw(uint64_t seed, int count);
std::vector<uint64_t> NumpyIntegers(uint64_t seed, uint64_t high, int count);

// The compressed token map of a model dir: `engram_token_map.json`, {"compressed_vocab_size": C,
// "token_map": [vocab ids in [0, C)]} (the reference derives it from the tokenizer when it binds
// one; tools/make_golden_v41.py writes the golden models', init-model its presets').
StatusOr<std::vector<int32_t>> LoadEngramTokenMap(const std::string& model_dir,
                                                  const io::DeepseekV41Config& config);
Status WriteEngramTokenMap(const std::string& model_dir, int64_t compressed_vocab_size,
                           const std::vector<int32_t>& token_map);

// One Engram table: rows of `dim` values in the checkpoint's mapping, gathered and dequantized
// per lookup (F32, BF16, or F8_E4M3 rows times one F32 / F8_E8M0 / BF16 scale per 32 channels).
// The checkpoint must outlive it.
class EngramTable {
 public:
  static StatusOr<EngramTable> Open(const io::Checkpoint& ckpt, const std::string& prefix,
                                    int64_t rows, int64_t dim);
  int64_t rows() const { return rows_; }
  int64_t dim() const { return dim_; }
  void Row(int64_t r, float* out) const;
  // F8_E4M3 tables: every row's scales [rows, dim / 32] as fp32 (empty for F32 / BF16 tables).
  std::vector<float> ScalesF32() const;
  const io::TensorView& weight() const { return *weight_; }

 private:
  float ScaleAt(int64_t i) const;  // scale i of the F8_E4M3 rows, as fp32
  const io::TensorView* weight_ = nullptr;
  const io::TensorView* scale_ = nullptr;  // F8_E4M3 rows only
  int64_t rows_ = 0, dim_ = 0;
};

struct EngramWeights {
  EngramTable embed;
  deepseek_v4::Matrix wkv;       // [(hc + 1) * D, cols * engram_head_dim]
  std::vector<float> q_weight;   // [hc, D]
  std::vector<float> k_weight;   // [hc, D]
  std::vector<float> qk_weight;  // q_weight * k_weight (the only way the reference uses them)
};

// X [n, hc, D] streams of n rows; hash_ids [n, cols] (this layer's columns of each row).
void EngramForward(const EngramWeights& w, const io::DeepseekV41Config& config,
                   const int64_t* hash_ids, int64_t hash_stride, int64_t n, float* X,
                   ThreadPool* pool);

}  // namespace dsinfer::model::deepseek_v41
