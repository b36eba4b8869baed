#include "model/deepseek_v41/engram.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "backend/cpu/gemm.h"
#include "base/dtype.h"

namespace dsinfer::model::deepseek_v41 {

namespace {

__extension__ typedef unsigned __int128 u128;  // GCC / Clang

uint64_t MulMod(uint64_t a, uint64_t b, uint64_t m) {
  return static_cast<uint64_t>(static_cast<u128>(a) * b % m);
}

uint64_t PowMod(uint64_t b, uint64_t e, uint64_t m) {
  uint64_t r = 1 % m;
  for (b %= m; e > 0; e >>= 1) {
    if (e & 1) r = MulMod(r, b, m);
    b = MulMod(b, b, m);
  }
  return r;
}

// Deterministic Miller-Rabin for 64-bit n (these bases decide every n < 3.3e24).
bool IsPrime(uint64_t n) {
  if (n < 2) return false;
  for (uint64_t p : {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37}) {
    if (n % p == 0) return n == p;
  }
  uint64_t d = n - 1;
  int s = 0;
  while ((d & 1) == 0) d >>= 1, ++s;
  for (uint64_t a : {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37}) {
    uint64_t x = PowMod(a, d, n);
    if (x == 1 || x == n - 1) continue;
    bool composite = true;
    for (int i = 1; i < s && composite; ++i) {
      x = MulMod(x, x, n);
      if (x == n - 1) composite = false;
    }
    if (composite) return false;
  }
  return true;
}

// numpy's SeedSequence (pool of 4 uint32 words) for one non-negative integer entropy.
std::vector<uint32_t> SeedSequenceState(uint64_t entropy, int n_words) {
  constexpr uint32_t kInitA = 0x43b0d7e5, kMultA = 0x931e8875, kInitB = 0x8b51f9dd,
                     kMultB = 0x58f38ded, kMixL = 0xca01f9dd, kMixR = 0x4973f715;
  std::vector<uint32_t> words;
  if (entropy == 0) words.push_back(0);
  for (; entropy > 0; entropy >>= 32) words.push_back(static_cast<uint32_t>(entropy));
  uint32_t hash_const = kInitA;
  auto hashmix = [&](uint32_t v) {
    v ^= hash_const;
    hash_const *= kMultA;
    v *= hash_const;
    v ^= v >> 16;
    return v;
  };
  auto mix = [](uint32_t x, uint32_t y) {
    uint32_t r = kMixL * x - kMixR * y;
    r ^= r >> 16;
    return r;
  };
  uint32_t pool[4];
  for (size_t i = 0; i < 4; ++i) pool[i] = hashmix(i < words.size() ? words[i] : 0);
  for (int src = 0; src < 4; ++src) {
    for (int dst = 0; dst < 4; ++dst) {
      if (src != dst) pool[dst] = mix(pool[dst], hashmix(pool[src]));
    }
  }
  for (size_t src = 4; src < words.size(); ++src) {
    for (int dst = 0; dst < 4; ++dst) pool[dst] = mix(pool[dst], hashmix(words[src]));
  }
  std::vector<uint32_t> out(static_cast<size_t>(n_words));
  uint32_t hc = kInitB;
  for (int i = 0; i < n_words; ++i) {
    uint32_t v = pool[i % 4];
    v ^= hc;
    hc *= kMultB;
    v *= hc;
    v ^= v >> 16;
    out[static_cast<size_t>(i)] = v;
  }
  return out;
}

// numpy's PCG64 (XSL-RR 128/64) seeded from a SeedSequence.
class Pcg64 {
 public:
  explicit Pcg64(uint64_t entropy) {
    const std::vector<uint32_t> w = SeedSequenceState(entropy, 8);
    uint64_t v[4];
    for (int i = 0; i < 4; ++i) v[i] = w[2 * i] | (static_cast<uint64_t>(w[2 * i + 1]) << 32);
    const u128 seed = (static_cast<u128>(v[0]) << 64) | v[1];
    const u128 seq = (static_cast<u128>(v[2]) << 64) | v[3];
    state_ = 0;
    inc_ = (seq << 1) | 1;
    Step();
    state_ += seed;
    Step();
  }
  uint64_t Next64() {
    Step();
    const uint64_t x = static_cast<uint64_t>(state_ >> 64) ^ static_cast<uint64_t>(state_);
    const unsigned rot = static_cast<unsigned>(state_ >> 122);
    return (x >> rot) | (x << ((64 - rot) & 63));
  }

 private:
  void Step() {
    const u128 mult = (static_cast<u128>(2549297995355413924ull) << 64) | 4865540595714422341ull;
    state_ = state_ * mult + inc_;
  }
  u128 state_ = 0, inc_ = 0;
};

// numpy's Generator.integers(0, rng + 1) for rng > 2^32 - 1 (Lemire's bounded draw).
uint64_t BoundedLemire64(Pcg64& g, uint64_t rng) {
  const uint64_t excl = rng + 1;
  u128 m = static_cast<u128>(g.Next64()) * excl;
  uint64_t left = static_cast<uint64_t>(m);
  if (left < excl) {
    const uint64_t threshold = (std::numeric_limits<uint64_t>::max() - rng) % excl;
    while (left < threshold) {
      m = static_cast<u128>(g.Next64()) * excl;
      left = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

// numpy's buffered 32-bit Lemire draw (rng <= 2^32 - 1), for tiny bounds.
uint64_t BoundedLemire32(Pcg64& g, uint32_t rng, int* bcnt, uint32_t* buf) {
  auto next32 = [&]() -> uint32_t {
    if (*bcnt == 0) {
      const uint64_t v = g.Next64();
      *buf = static_cast<uint32_t>(v >> 32);
      *bcnt = 1;
      return static_cast<uint32_t>(v);
    }
    *bcnt = 0;
    return *buf;
  };
  const uint32_t excl = rng + 1;
  uint64_t m = static_cast<uint64_t>(next32()) * excl;
  uint32_t left = static_cast<uint32_t>(m);
  if (left < excl) {
    const uint32_t threshold = (std::numeric_limits<uint32_t>::max() - rng) % excl;
    while (left < threshold) {
      m = static_cast<uint64_t>(next32()) * excl;
      left = static_cast<uint32_t>(m);
    }
  }
  return m >> 32;
}

}  // namespace

std::vector<std::vector<int64_t>> EngramPrimes(const io::DeepseekV41Config& c) {
  std::vector<std::vector<int64_t>> primes;
  std::set<int64_t> seen;
  for (size_t l = 0; l < c.engram_layer_ids.size(); ++l) {
    std::vector<int64_t> layer;
    for (int g = 0; g < c.engram_max_ngram_size - 1; ++g) {
      int64_t current = c.engram_vocab_size - 1;
      for (int h = 0; h < c.engram_n_heads; ++h) {
        int64_t candidate = current + 1;
        while (!IsPrime(static_cast<uint64_t>(candidate)) || seen.count(candidate)) ++candidate;
        current = candidate;
        seen.insert(current);
        layer.push_back(current);
      }
    }
    primes.push_back(std::move(layer));
  }
  return primes;
}

std::vector<int64_t> EngramRowsNeeded(const io::DeepseekV41Config& c) {
  std::vector<int64_t> rows;
  for (const auto& layer : EngramPrimes(c)) {
    int64_t total = 0;
    for (int64_t p : layer) total += p;
    rows.push_back(total);
  }
  return rows;
}

std::vector<uint64_t> NumpyIntegers(uint64_t seed, uint64_t high, int count) {
  Pcg64 g(seed);
  const uint64_t rng = high - 1;  // draws in [0, rng]
  std::vector<uint64_t> out;
  int bcnt = 0;
  uint32_t buf = 0;
  for (int i = 0; i < count; ++i) {
    if (rng == 0) {
      out.push_back(0);
    } else if (rng <= 0xFFFFFFFFull) {
      out.push_back(BoundedLemire32(g, static_cast<uint32_t>(rng), &bcnt, &buf));
    } else {
      out.push_back(BoundedLemire64(g, rng));
    }
  }
  return out;
}

std::vector<int64_t> EngramHashMultipliers(int layer_id, int max_ngram,
                                           int64_t compressed_vocab_size) {
  const int64_t bound =
      std::max<int64_t>(1, (std::numeric_limits<int64_t>::max() / compressed_vocab_size) / 2);
  std::vector<int64_t> out;
  for (uint64_t v : NumpyIntegers(10007ull * static_cast<uint64_t>(layer_id),
                                  static_cast<uint64_t>(bound), max_ngram)) {
    out.push_back(static_cast<int64_t>(v) * 2 + 1);
  }
  return out;
}

std::vector<uint64_t> NumpyPcg64Raw(uint64_t seed, int count) {
  Pcg64 g(seed);
  std::vector<uint64_t> out;
  for (int i = 0; i < count; ++i) out.push_back(g.Next64());
  return out;
}

int EngramHasher::IndexOf(int layer) const {
  for (size_t i = 0; i < layer_ids.size(); ++i) {
    if (layer_ids[i] == layer) return static_cast<int>(i);
  }
  return -1;
}

void EngramHasher::Hash(const int32_t* back, int64_t* out) const {
  // tokens[k]: the compressed id k positions back, the pad id from the sequence start on.
  std::vector<int64_t> tokens(static_cast<size_t>(max_ngram));
  bool blocked = false;
  for (int k = 0; k < max_ngram; ++k) {
    blocked = blocked || back[k] < 0;
    tokens[k] = blocked ? pad_id : token_map[static_cast<size_t>(back[k])];
  }
  const int C = cols();
  for (int l = 0; l < layers(); ++l) {
    const std::vector<int64_t>& mult = multipliers[l];
    int64_t rolling = tokens[0] * mult[0];
    for (int i = 1; i < max_ngram; ++i) {
      rolling ^= tokens[i] * mult[i];
      for (int h = 0; h < n_heads; ++h) {
        const int c = (i - 1) * n_heads + h;
        out[l * C + c] = rolling % primes[l][c] + offsets[l][c];
      }
    }
  }
}

StatusOr<EngramHasher> EngramHasher::Build(const io::DeepseekV41Config& c,
                                           std::vector<int32_t> token_map) {
  EngramHasher h;
  h.max_ngram = c.engram_max_ngram_size;
  h.n_heads = c.engram_n_heads;
  h.layer_ids = c.engram_layer_ids;
  if (h.max_ngram < 2 || h.n_heads <= 0 || c.engram_head_dim <= 0 || c.engram_vocab_size < 1 ||
      c.engram_compressed_vocab_size < 1) {
    return InvalidArgument(
        "config.json: Engram needs engram_max_ngram_size >= 2 and engram_n_heads, "
        "engram_head_dim, engram_vocab_size, engram_compressed_vocab_size > 0");
  }
  if (c.engram_num_embeddings.size() != c.engram_layer_ids.size()) {
    return InvalidArgument(
        "config.json: engram_num_embeddings must have one entry per engram_layer_ids entry");
  }
  if (static_cast<int64_t>(token_map.size()) != c.vocab_size) {
    return InvalidArgument("engram_token_map.json: " + std::to_string(token_map.size()) +
                           " entries for a vocabulary of " + std::to_string(c.vocab_size));
  }
  for (int32_t v : token_map) {
    if (v < 0 || v >= c.engram_compressed_vocab_size) {
      return InvalidArgument("engram_token_map.json: compressed id " + std::to_string(v) +
                             " outside [0, engram_compressed_vocab_size = " +
                             std::to_string(c.engram_compressed_vocab_size) + ")");
    }
  }
  if (c.engram_pad_id < 0 || c.engram_pad_id >= c.vocab_size) {
    return InvalidArgument("config.json: engram_pad_id " + std::to_string(c.engram_pad_id) +
                           " is not a token id");
  }
  h.token_map = std::move(token_map);
  h.pad_id = h.token_map[static_cast<size_t>(c.engram_pad_id)];
  h.primes = EngramPrimes(c);
  for (size_t l = 0; l < h.layer_ids.size(); ++l) {
    std::vector<int64_t> off;
    int64_t total = 0;
    for (int64_t p : h.primes[l]) {
      off.push_back(total);
      total += p;
    }
    if (total > c.engram_num_embeddings[l]) {
      return InvalidArgument("config.json: engram_num_embeddings[" + std::to_string(l) +
                             "] = " + std::to_string(c.engram_num_embeddings[l]) +
                             " is smaller than the hash's range of " + std::to_string(total) +
                             " rows");
    }
    h.offsets.push_back(std::move(off));
    h.multipliers.push_back(
        EngramHashMultipliers(h.layer_ids[l], h.max_ngram, c.engram_compressed_vocab_size));
  }
  return h;
}

StatusOr<std::vector<int32_t>> LoadEngramTokenMap(const std::string& model_dir,
                                                  const io::DeepseekV41Config& c) {
  const std::string path = (std::filesystem::path(model_dir) / "engram_token_map.json").string();
  std::ifstream in(path);
  if (!in) {
    return NotFound(
        "DeepSeek-V4.1 Engram (engram_layer_ids) needs the compressed token map the reference "
        "derives from the tokenizer: " +
        path + " is missing");
  }
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("token_map") || !j["token_map"].is_array() ||
      !j.contains("compressed_vocab_size") || !j["compressed_vocab_size"].is_number_integer()) {
    return InvalidArgument(path +
                           ": expected {\"compressed_vocab_size\": int, \"token_map\": [ints]}");
  }
  if (j["compressed_vocab_size"].get<int64_t>() != c.engram_compressed_vocab_size) {
    return InvalidArgument(path + ": compressed_vocab_size " +
                           std::to_string(j["compressed_vocab_size"].get<int64_t>()) +
                           " does not match engram_compressed_vocab_size " +
                           std::to_string(c.engram_compressed_vocab_size) +
                           " (every hash multiplier derives from it)");
  }
  std::vector<int32_t> map;
  map.reserve(j["token_map"].size());
  for (const auto& v : j["token_map"]) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
        v.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return InvalidArgument(path + ": token_map holds a value that is not a compressed id");
    }
    map.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  return map;
}

Status WriteEngramTokenMap(const std::string& model_dir, int64_t compressed_vocab_size,
                           const std::vector<int32_t>& token_map) {
  nlohmann::json j;
  j["compressed_vocab_size"] = compressed_vocab_size;
  j["token_map"] = token_map;
  std::ofstream out(std::filesystem::path(model_dir) / "engram_token_map.json");
  out << j.dump() << "\n";
  if (!out) return Internal("cannot write engram_token_map.json in " + model_dir);
  return Status::Ok();
}

StatusOr<EngramTable> EngramTable::Open(const io::Checkpoint& ckpt, const std::string& prefix,
                                        int64_t rows, int64_t dim) {
  EngramTable t;
  t.rows_ = rows;
  t.dim_ = dim;
  DSINFER_ASSIGN_OR_RETURN(t.weight_, ckpt.Get(prefix + "weight"));
  const io::TensorView& w = *t.weight_;
  if (w.shape != std::vector<int64_t>{rows, dim}) {
    return InvalidArgument("tensor " + w.name + ": wrong shape " + w.ShapeString() +
                           ", expected [" + std::to_string(rows) + ", " + std::to_string(dim) +
                           "]");
  }
  if (w.dtype == DType::kF8E4M3) {
    if (dim % 32 != 0) {
      return InvalidArgument("tensor " + w.name + ": F8_E4M3 rows need a multiple of 32 channels");
    }
    DSINFER_ASSIGN_OR_RETURN(t.scale_, ckpt.Get(prefix + "scale"));
    const io::TensorView& s = *t.scale_;
    if (s.shape != std::vector<int64_t>{rows, dim / 32} ||
        (s.dtype != DType::kF32 && s.dtype != DType::kF8E8M0 && s.dtype != DType::kBF16)) {
      return InvalidArgument("tensor " + s.name + ": expected F32 / F8_E8M0 / BF16 [" +
                             std::to_string(rows) + ", " + std::to_string(dim / 32) + "], got " +
                             std::string(DTypeName(s.dtype)) + " " + s.ShapeString());
    }
  } else if (w.dtype != DType::kF32 && w.dtype != DType::kBF16) {
    return InvalidArgument("tensor " + w.name + ": dtype " + std::string(DTypeName(w.dtype)) +
                           " is not F32, BF16 or F8_E4M3");
  }
  return t;
}

float EngramTable::ScaleAt(int64_t i) const {
  float scale = 0.0f;
  switch (scale_->dtype) {
    case DType::kF32:
      std::memcpy(&scale, scale_->data + i * 4, 4);
      return scale;
    case DType::kF8E8M0:
      return E8M0ToFloat(scale_->data[i]);
    default: {  // BF16 (Open refuses the rest)
      uint16_t v;
      std::memcpy(&v, scale_->data + i * 2, 2);
      return Bf16ToFloat(v);
    }
  }
}

std::vector<float> EngramTable::ScalesF32() const {
  if (scale_ == nullptr) return {};
  std::vector<float> out(static_cast<size_t>(rows_ * (dim_ / 32)));
  for (size_t i = 0; i < out.size(); ++i) out[i] = ScaleAt(static_cast<int64_t>(i));
  return out;
}

void EngramTable::Row(int64_t r, float* out) const {
  const uint8_t* base = weight_->data;
  switch (weight_->dtype) {
    case DType::kF32:
      std::memcpy(out, base + r * dim_ * 4, static_cast<size_t>(dim_) * 4);
      return;
    case DType::kBF16:
      for (int64_t i = 0; i < dim_; ++i) {
        uint16_t b;
        std::memcpy(&b, base + (r * dim_ + i) * 2, 2);
        out[i] = Bf16ToFloat(b);
      }
      return;
    case DType::kF8E4M3: {
      const int64_t blocks = dim_ / 32;
      for (int64_t b = 0; b < blocks; ++b) {
        const float scale = ScaleAt(r * blocks + b);
        for (int64_t i = 0; i < 32; ++i) {
          out[b * 32 + i] = E4M3ToFloat(base[r * dim_ + b * 32 + i]) * scale;
        }
      }
      return;
    }
    default:
      return;  // refused by Open
  }
}

void EngramForward(const EngramWeights& w, const io::DeepseekV41Config& c, const int64_t* hash_ids,
                   int64_t hash_stride, int64_t n, float* X, ThreadPool* pool) {
  const int64_t D = c.hidden_size, hc = c.hc_mult, hd = c.engram_head_dim;
  const int64_t cols = int64_t{c.engram_max_ngram_size - 1} * c.engram_n_heads;
  const int64_t in = cols * hd, out = (hc + 1) * D;
  std::vector<float> rows(static_cast<size_t>(n * in)), kv(static_cast<size_t>(n * out));
  pool->ParallelFor(n, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      for (int64_t col = 0; col < cols; ++col) {
        w.embed.Row(hash_ids[t * hash_stride + col], rows.data() + t * in + col * hd);
      }
    }
  });
  backend::cpu::Linear(rows.data(), n, in, w.wkv.view(), out, kv.data(), pool);
  const float eps = static_cast<float>(c.rms_norm_eps);
  const float inv_sqrt_d = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  pool->ParallelFor(n, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const float* key = kv.data() + t * out;
      const float* value = key + hc * D;
      for (int64_t s = 0; s < hc; ++s) {
        float* h = X + (t * hc + s) * D;
        const float* k = key + s * D;
        const float* wq = w.qk_weight.data() + s * D;
        double hh = 0.0, kk = 0.0, dot = 0.0;
        for (int64_t i = 0; i < D; ++i) {
          hh += static_cast<double>(h[i]) * h[i];
          kk += static_cast<double>(k[i]) * k[i];
          dot += static_cast<double>(h[i] * wq[i] * k[i]);
        }
        const float rstd = (1.0f / std::sqrt(static_cast<float>(hh / D) + eps)) *
                           (1.0f / std::sqrt(static_cast<float>(kk / D) + eps));
        const float d = static_cast<float>(dot) * rstd * inv_sqrt_d;
        const float mag = std::sqrt(std::max(std::fabs(d), 1e-6f));
        const float gate = 1.0f / (1.0f + std::exp(-std::copysign(mag, d)));
        // Two roundings, as the reference's `h + gate * value` (this file is built with
        // -ffp-contract=off: a fused multiply-add rounds once and moves the stream by an ulp).
        for (int64_t i = 0; i < D; ++i) h[i] += gate * value[i];
      }
    }
  });
}

}  // namespace dsinfer::model::deepseek_v41
