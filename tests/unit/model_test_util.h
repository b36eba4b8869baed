// Small model configs for model tests — DeepSeek-V4 with every layer type, DeepSeek-V4.1 with
// every layer mode — their model dirs, and the chunked forward both families' schedule tests run.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "model/deepseek_v4/init_presets.h"
#include "model/deepseek_v4/weights.h"
#include "model/deepseek_v41/init_presets.h"
#include "test_util.h"

namespace dsinfer::testing {

// The tiny preset with a 300-token vocabulary: SWA, CSA (rate 4, top-k 8), HCA (rate 16), hash and
// top-k MoE, MTP. Windows of 16 so that short sequences exercise every state transition.
inline io::DeepseekV4Config SmallConfig() {
  auto c = *model::deepseek_v4::PresetConfig("tiny");
  c.vocab_size = 300;
  return c;
}

// SmallConfig with nope dims of two FP8 blocks (head_dim 192, RoPE 64) and index heads of two FP4
// blocks (64), so that every rounding of the FP8 cache (io::KvCacheDtype::kFp8) applies.
inline io::DeepseekV4Config SmallFp8CacheConfig() {
  io::DeepseekV4Config c = SmallConfig();
  c.head_dim = 192;
  c.rope_head_dim = 64;
  c.index_head_dim = 64;
  return c;
}

// n token ids below SmallConfig().vocab_size, a pure function of the seed.
inline std::vector<int32_t> RandomIds(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(n);
  for (auto& id : ids) id = static_cast<int32_t>(rng() % SmallConfig().vocab_size);
  return ids;
}

// n floats N(0, 0.3) from rng.
inline std::vector<float> RandomFloats(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 0.3f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = normal(rng);
  return v;
}

// fp32 MoE weights of config c from rng (RandomFloats): the gate, the routed experts and, with
// `shared`, the shared expert; no router bias or hash table (the caller's).
inline model::deepseek_v4::MoeWeights RandomMoeWeights(const io::DeepseekV4Config& c,
                                                       std::mt19937& rng, bool shared) {
  const int64_t D = c.hidden_size, I = c.moe_intermediate_size;
  auto matrix = [&](int64_t rows, int64_t cols) {
    model::deepseek_v4::Matrix mx;
    mx.rows = rows;
    mx.cols = cols;
    mx.data = RandomFloats(rows * cols, rng);
    return mx;
  };
  auto expert = [&] {
    return model::deepseek_v4::ExpertWeights{matrix(I, D), matrix(I, D), matrix(D, I)};
  };
  model::deepseek_v4::MoeWeights w;
  w.gate = matrix(c.n_routed_experts, D);
  for (int64_t e = 0; e < c.n_routed_experts; ++e) w.experts.push_back(expert());
  if (shared) w.shared = std::make_unique<model::deepseek_v4::ExpertWeights>(expert());
  return w;
}

inline std::string SmallModelDir(model::deepseek_v4::WeightFormat format, const std::string& name,
                                 uint64_t seed = 7) {
  const std::string dir = ScratchDir("model_" + name);
  auto st = model::deepseek_v4::WriteRandomModel(SmallConfig(), dir, seed, format);
  if (!st.ok()) throw std::runtime_error(st.ToString());
  return dir;
}

// The v41-tiny-dspark preset with a 300-token vocabulary: window-only layers, two ratio-2 KV
// groups, a ratio-1 group with a Reuse and a Reindex layer, the two-level top-k; windows of 8; a
// DSpark drafter of 3 stages (blocks of 5; loaded only when asked for).
inline io::DeepseekV41Config SmallV41Config() {
  auto c = *model::deepseek_v41::PresetConfig("v41-tiny-dspark");
  c.vocab_size = 300;
  c.dspark_noise_token_id = 299;
  return c;
}

// v41-tiny-engram (Engram at layers 1 and 5) with a 320-id vocabulary (the engine mixes' ids) and
// a 160-id compressed one (its stand-in token map sends i and i + 160 to one id).
inline io::DeepseekV41Config SmallV41EngramConfig() {
  auto c = *model::deepseek_v41::PresetConfig("v41-tiny-engram");
  c.vocab_size = 320;
  c.dspark_noise_token_id = 319;
  c.engram_compressed_vocab_size = 160;
  return c;
}

inline std::string SmallV41EngramModelDir(const std::string& name, uint64_t seed = 13) {
  const std::string dir = ScratchDir("model_" + name);
  auto st = model::deepseek_v41::WriteRandomModel(SmallV41EngramConfig(), dir, seed);
  if (!st.ok()) throw std::runtime_error(st.ToString());
  return dir;
}

inline std::string SmallV41ModelDir(const std::string& name, uint64_t seed = 11) {
  const std::string dir = ScratchDir("model_" + name);
  auto st = model::deepseek_v41::WriteRandomModel(SmallV41Config(), dir, seed);
  if (!st.ok()) throw std::runtime_error(st.ToString());
  return dir;
}

// The logits of every position of `ids` fed to a fresh sequence of `model` (either family's Model)
// in chunks of `sizes` (which must cover `ids`).
template <typename Model, typename Rows>
std::vector<float> ChunkedLogits(Model& model, const std::vector<int32_t>& ids,
                                 const std::vector<int>& sizes, Rows all_rows) {
  auto state = model.NewSequence();
  std::vector<float> all;
  size_t at = 0;
  for (int s : sizes) {
    auto out = model.Forward(
        {{state.get(), std::vector<int32_t>(ids.begin() + at, ids.begin() + at + s)}}, all_rows);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    if (out.ok()) {
      if constexpr (std::is_same_v<std::decay_t<decltype(*out)>, std::vector<float>>) {
        all.insert(all.end(), out->begin(), out->end());
      } else {
        all.insert(all.end(), out->logits.begin(), out->logits.end());
      }
    }
    at += s;
  }
  EXPECT_EQ(at, ids.size());
  return all;
}

// Named schedules that cover `n` tokens: token by token, odd chunks, a prefill then three decode
// steps then a prefill, and `random` random chunkings (chunks of 1..max_chunk), for checks that
// every schedule gives the same logits.
inline std::vector<std::pair<std::string, std::vector<int>>> Schedules(int n, int max_chunk,
                                                                       int random = 3) {
  std::vector<std::pair<std::string, std::vector<int>>> out;
  out.push_back({"token by token", std::vector<int>(static_cast<size_t>(n), 1)});
  std::vector<int> odd;
  int left = n;
  for (int s : {5, 11, 3, 17}) {
    if (left <= s) break;
    odd.push_back(s);
    left -= s;
  }
  odd.push_back(left);
  out.push_back({"odd chunks", odd});
  const int prefill = std::max(1, n / 2 - 2);
  if (n > prefill + 3)
    out.push_back({"prefill, decode, prefill", {prefill, 1, 1, 1, n - prefill - 3}});
  std::mt19937 rng(9);
  for (int trial = 0; trial < random; ++trial) {
    std::vector<int> sizes;
    for (int rest = n; rest > 0;) {
      const int s = std::min<int>(rest, 1 + static_cast<int>(rng() % max_chunk));
      sizes.push_back(s);
      rest -= s;
    }
    out.push_back({"random chunks, trial " + std::to_string(trial), sizes});
  }
  return out;
}

// The argmax id of each row of logits [rows, vocab] (ties to the lower id).
inline std::vector<int64_t> ArgmaxRows(const std::vector<float>& logits, int64_t vocab) {
  std::vector<int64_t> ids;
  for (size_t at = 0; at + static_cast<size_t>(vocab) <= logits.size(); at += vocab) {
    ids.push_back(std::max_element(logits.begin() + at, logits.begin() + at + vocab) -
                  (logits.begin() + at));
  }
  return ids;
}

}  // namespace dsinfer::testing
