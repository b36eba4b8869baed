#include "model/deepseek_v4/init_presets.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <numeric>

#include "base/thread_pool.h"

#include "io/quant.h"
#include "io/safetensors.h"

namespace dsinfer::model::deepseek_v4 {

namespace {

using io::DeepseekV4Config;

uint64_t SplitMix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t HashName(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

class Rng {
 public:
  Rng(uint64_t seed, const std::string& name) : state_(seed * 0x9e3779b97f4a7c15ull ^ HashName(name)) {}
  // Box-Muller in float, both values of a pair used (the generator's cost dominated writing the
  // large presets: 38 ns per value in double with one value per pair, 14 ns now).
  float Normal() {
    if (have_spare_) {
      have_spare_ = false;
      return spare_;
    }
    const float u1 = std::max(static_cast<float>((SplitMix(state_) >> 40) * (1.0 / 16777216.0)), 1e-30f);
    const float u2 = static_cast<float>((SplitMix(state_) >> 40) * (1.0 / 16777216.0));
    const float r = std::sqrt(-2.0f * std::log(u1));
    const float theta = 6.28318530717958647692f * u2;
    spare_ = r * std::sin(theta);
    have_spare_ = true;
    return r * std::cos(theta);
  }
  uint64_t Next() { return SplitMix(state_); }

 private:
  uint64_t state_;
  float spare_ = 0.0f;
  bool have_spare_ = false;
};

enum class Kind { kLinear, kFp4Expert, kPlain, kFp32 };

// Generates tensors into the current shard; Flush writes the shard and frees its memory, so a
// model larger than RAM streams out shard by shard (one per layer for the large presets). Adds are
// thread-safe: the routed experts of a layer are generated in parallel.
class Writer {
 public:
  Writer(uint64_t seed, WeightFormat format) : seed_(seed), format_(format), pool_(0) {}

  // Random normal values with the given mean and std.
  std::vector<float> Values(const std::string& name, int64_t n, float mean, float std) {
    Rng rng(seed_, name);
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = mean + std * rng.Normal();
    return v;
  }

  void Linear(const std::string& name, int64_t out, int64_t in, Kind kind) {
    std::vector<float> w = Values(name + ".weight", out * in, 0.0f, 1.0f / std::sqrt(float(in)));
    const bool fp8 = kind == Kind::kLinear &&
                     (format_ == WeightFormat::kFp8 || format_ == WeightFormat::kOfficial ||
                      format_ == WeightFormat::kOfficialBf16);
    const bool fp4 = kind == Kind::kFp4Expert && in % 32 == 0 &&
                     (format_ == WeightFormat::kOfficial || format_ == WeightFormat::kOfficialBf16);
    const bool fp8_expert = kind == Kind::kFp4Expert && !fp4 && format_ != WeightFormat::kF32 &&
                            format_ != WeightFormat::kBf16;
    if (fp8 || fp8_expert) {
      auto q = io::QuantizeFp8Blocks(w, out, in, 128);
      if (format_ == WeightFormat::kOfficialBf16) {
        for (int64_t i = 0; i < out * in; ++i) {
          w[i] = E4M3ToFloat(q.data[i]) * E8M0ToFloat(q.scale[(i / in / 128) * q.scale_shape[1] + (i % in) / 128]);
        }
        Plain(name + ".weight", {out, in}, w);
        return;
      }
      Add(name + ".weight", DType::kF8E4M3, q.data_shape, std::move(q.data));
      Add(name + ".scale", DType::kF8E8M0, q.scale_shape, std::move(q.scale));
      return;
    }
    if (fp4) {
      auto q = io::QuantizeFp4(w, out, in);
      if (format_ == WeightFormat::kOfficialBf16) {
        for (int64_t i = 0; i < out * in; ++i) {
          const uint8_t byte = q.data[i / 2];
          w[i] = E2M1ToFloat(i % 2 == 0 ? (byte & 0xf) : (byte >> 4)) * E8M0ToFloat(q.scale[i / 32]);
        }
        Plain(name + ".weight", {out, in}, w);
        return;
      }
      Add(name + ".weight", DType::kI8, q.data_shape, std::move(q.data));
      Add(name + ".scale", DType::kF8E8M0, q.scale_shape, std::move(q.scale));
      return;
    }
    Plain(name + ".weight", {out, in}, w);
  }

  // BF16 in the release formats, F32 in kF32.
  void Plain(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& v) {
    if (format_ == WeightFormat::kF32) {
      std::lock_guard<std::mutex> lock(mu_);
      writer_.AddF32(name, std::move(shape), v);
      names_.push_back(name);
      return;
    }
    std::vector<uint8_t> bytes(v.size() * 2);
    for (size_t i = 0; i < v.size(); ++i) {
      const uint16_t b = FloatToBf16(v[i]);
      std::memcpy(bytes.data() + 2 * i, &b, 2);
    }
    Add(name, DType::kBF16, std::move(shape), std::move(bytes));
  }

  void Add(const std::string& name, DType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    writer_.Add(name, dtype, std::move(shape), std::move(bytes));
    names_.push_back(name);
  }

  // Writes the tensors added since the last flush to <dir>/<file> and records them in the index.
  Status Flush(const std::string& dir, const std::string& file) {
    DSINFER_RETURN_IF_ERROR(writer_.Write((std::filesystem::path(dir) / file).string()));
    for (const auto& n : names_) weight_map_[n] = file;
    total_bytes_ += writer_.total_bytes();
    names_.clear();
    writer_ = io::SafetensorsWriter();
    return Status::Ok();
  }
  const std::map<std::string, std::string>& weight_map() const { return weight_map_; }
  size_t total_bytes() const { return total_bytes_; }

  void Norm(const std::string& name, int64_t n) { Plain(name, {n}, Values(name, n, 1.0f, 0.1f)); }
  void Fp32(const std::string& name, std::vector<int64_t> shape, float mean, float std) {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    std::lock_guard<std::mutex> lock(mu_);
    writer_.AddF32(name, std::move(shape), Values(name, n, mean, std));
    names_.push_back(name);
  }

  void Tid2eid(const std::string& name, int64_t vocab, int k, int experts) {
    Rng rng(seed_, name);
    std::vector<uint8_t> bytes(static_cast<size_t>(vocab * k * 8));
    std::vector<int64_t> perm(experts);
    for (int64_t t = 0; t < vocab; ++t) {
      std::iota(perm.begin(), perm.end(), 0);
      for (int i = 0; i < k; ++i) {  // k distinct experts (partial Fisher-Yates)
        const int j = i + static_cast<int>(rng.Next() % static_cast<uint64_t>(experts - i));
        std::swap(perm[i], perm[j]);
        std::memcpy(bytes.data() + (t * k + i) * 8, &perm[i], 8);
      }
    }
    Add(name, DType::kI64, {vocab, k}, std::move(bytes));
  }

  void Hc(const std::string& p, const DeepseekV4Config& c) {
    const int64_t mix = (2 + c.hc_mult) * c.hc_mult;
    Fp32(p + "_fn", {mix, c.hc_mult * c.hidden_size}, 0.0f, 0.1f);
    Fp32(p + "_base", {mix}, 0.0f, 0.5f);
    Fp32(p + "_scale", {3}, 1.0f, 0.2f);
  }

  void HcHead(const std::string& p, const DeepseekV4Config& c) {
    Fp32(p + "hc_head_fn", {c.hc_mult, c.hc_mult * c.hidden_size}, 0.0f, 0.1f);
    Fp32(p + "hc_head_base", {c.hc_mult}, 0.0f, 0.5f);
    Fp32(p + "hc_head_scale", {1}, 1.0f, 0.2f);
  }

  void Compressor(const std::string& p, const DeepseekV4Config& c, int rate, int dim, bool overlap) {
    const int64_t width = overlap ? 2 * dim : dim;
    Linear(p + "wkv", width, c.hidden_size, Kind::kPlain);
    Linear(p + "wgate", width, c.hidden_size, Kind::kPlain);
    Fp32(p + "ape", {rate, width}, 0.0f, 0.5f);
    Norm(p + "norm.weight", dim);
  }

  void Block(const std::string& p, const DeepseekV4Config& c, int rate, bool hash) {
    const int64_t D = c.hidden_size, H = c.num_heads, d = c.head_dim;
    Norm(p + "attn_norm.weight", D);
    Norm(p + "ffn_norm.weight", D);
    Hc(p + "hc_attn", c);
    Hc(p + "hc_ffn", c);
    const std::string a = p + "attn.";
    Linear(a + "wq_a", c.q_lora_rank, D, Kind::kLinear);
    Norm(a + "q_norm.weight", c.q_lora_rank);
    Linear(a + "wq_b", H * d, c.q_lora_rank, Kind::kLinear);
    Linear(a + "wkv", d, D, Kind::kLinear);
    Norm(a + "kv_norm.weight", d);
    Linear(a + "wo_a", int64_t{c.o_groups} * c.o_lora_rank, H * d / c.o_groups, Kind::kLinear);
    Linear(a + "wo_b", D, int64_t{c.o_groups} * c.o_lora_rank, Kind::kLinear);
    Fp32(a + "attn_sink", {H}, 0.0f, 1.0f);
    if (rate != 0) {
      const bool csa = rate == c.csa_rate;
      Compressor(a + "compressor.", c, rate, static_cast<int>(d), csa);
      if (csa) {
        Linear(a + "indexer.wq_b", int64_t{c.index_n_heads} * c.index_head_dim, c.q_lora_rank,
               Kind::kLinear);
        Linear(a + "indexer.weights_proj", c.index_n_heads, D, Kind::kPlain);
        Compressor(a + "indexer.compressor.", c, rate, c.index_head_dim, true);
      }
    }
    const std::string f = p + "ffn.";
    Linear(f + "gate", c.n_routed_experts, D, Kind::kPlain);
    if (hash) {
      Tid2eid(f + "gate.tid2eid", c.vocab_size, c.num_experts_per_tok, c.n_routed_experts);
    } else {
      Fp32(f + "gate.bias", {c.n_routed_experts}, 0.0f, 0.1f);
    }
    // Each tensor's values depend only on (seed, name), so the parallel order changes nothing.
    pool_.ParallelFor(c.n_routed_experts, [&](int64_t b, int64_t e_end) {
      for (int64_t e = b; e < e_end; ++e) {
        const std::string ep = f + "experts." + std::to_string(e) + ".";
        Linear(ep + "w1", c.moe_intermediate_size, D, Kind::kFp4Expert);
        Linear(ep + "w3", c.moe_intermediate_size, D, Kind::kFp4Expert);
        Linear(ep + "w2", D, c.moe_intermediate_size, Kind::kFp4Expert);
      }
    });
    if (c.n_shared_experts > 0) {
      Linear(f + "shared_experts.w1", c.moe_intermediate_size, D, Kind::kLinear);
      Linear(f + "shared_experts.w3", c.moe_intermediate_size, D, Kind::kLinear);
      Linear(f + "shared_experts.w2", D, c.moe_intermediate_size, Kind::kLinear);
    }
  }

  io::SafetensorsWriter& writer() { return writer_; }

 private:
  uint64_t seed_;
  WeightFormat format_;
  ThreadPool pool_;
  std::mutex mu_;
  io::SafetensorsWriter writer_;
  std::vector<std::string> names_;
  std::map<std::string, std::string> weight_map_;
  size_t total_bytes_ = 0;
};

DeepseekV4Config Base() {
  DeepseekV4Config c;
  c.vocab_size = 129280;
  c.scoring_func = "sqrtsoftplus";
  c.norm_topk_prob = true;
  c.swiglu_limit = 10.0;
  c.rope_theta = 10000.0;
  c.compress_rope_theta = 160000.0;
  c.compress_yarn = {true, 16.0, 65536.0, 32.0, 1.0, true};
  c.max_position_embeddings = 1048576;
  c.hc_mult = 4;
  c.hc_sinkhorn_iters = 20;
  c.hc_eps = 1e-6;
  c.rms_norm_eps = 1e-6;
  c.n_shared_experts = 1;
  c.csa_rate = 4;
  c.bos_token_id = 0;
  c.eos_token_id = 1;
  return c;
}

}  // namespace

StatusOr<WeightFormat> ParseWeightFormat(const std::string& name) {
  if (name == "f32") return WeightFormat::kF32;
  if (name == "bf16") return WeightFormat::kBf16;
  if (name == "fp8") return WeightFormat::kFp8;
  if (name == "official") return WeightFormat::kOfficial;
  if (name == "official-bf16") return WeightFormat::kOfficialBf16;
  return InvalidArgument("unknown weight format '" + name +
                         "' (f32, bf16, fp8, official, official-bf16)");
}

std::vector<std::string> PresetNames() { return {"tiny", "mid", "flash-l8"}; }

StatusOr<DeepseekV4Config> PresetConfig(const std::string& name) {
  DeepseekV4Config c = Base();
  if (name == "tiny") {
    // Every layer type (SWA, CSA, HCA), hash and top-k MoE, an MTP layer; small enough for CI.
    c.hidden_size = 128;
    c.num_layers = 4;
    c.compress_ratios = {0, 4, 16, 4};
    c.hash_layers = {true, false, false, false};
    c.num_heads = 4;
    c.head_dim = 64;
    c.rope_head_dim = 16;
    c.q_lora_rank = 64;
    c.o_groups = 2;
    c.o_lora_rank = 32;
    c.n_routed_experts = 8;
    c.num_experts_per_tok = 2;
    c.moe_intermediate_size = 64;
    c.routed_scaling_factor = 1.5;
    c.sliding_window = 16;
    c.index_n_heads = 4;
    c.index_head_dim = 32;
    c.index_topk = 8;
    c.num_mtp_layers = 1;
    c.compress_yarn = {true, 16.0, 256.0, 32.0, 1.0, true};
    c.max_position_embeddings = 4096;
  } else if (name == "mid") {
    // The V4-Flash layer schedule shape (SWA, SWA, then CSA/HCA) at a size a CPU runs in seconds.
    c.hidden_size = 512;
    c.num_layers = 6;
    c.compress_ratios = {0, 0, 4, 128, 4, 128};
    c.hash_layers = {true, true, false, false, false, false};
    c.num_heads = 8;
    c.head_dim = 128;
    c.rope_head_dim = 32;
    c.q_lora_rank = 192;
    c.o_groups = 4;
    c.o_lora_rank = 128;
    c.n_routed_experts = 32;
    c.num_experts_per_tok = 4;
    c.moe_intermediate_size = 256;
    c.routed_scaling_factor = 1.5;
    c.sliding_window = 128;
    c.index_n_heads = 8;
    c.index_head_dim = 64;
    c.index_topk = 64;
    c.num_mtp_layers = 1;
    c.max_position_embeddings = 65536;
    c.compress_yarn = {true, 16.0, 4096.0, 32.0, 1.0, true};
  } else if (name == "flash-l8") {
    // V4-Flash real dimensions (spec §1.1), the first 8 layers of its schedule plus the MTP layer:
    // the benchmark stack (ARCHITECTURE.md §5). Write it with --weights official.
    c.hidden_size = 4096;
    c.num_layers = 8;
    c.compress_ratios = {0, 0, 4, 128, 4, 128, 4, 128};
    c.hash_layers = {true, true, true, false, false, false, false, false};
    c.num_heads = 64;
    c.head_dim = 512;
    c.rope_head_dim = 64;
    c.q_lora_rank = 1024;
    c.o_groups = 8;
    c.o_lora_rank = 1024;
    c.n_routed_experts = 256;
    c.num_experts_per_tok = 6;
    c.moe_intermediate_size = 2048;
    c.routed_scaling_factor = 1.5;
    c.sliding_window = 128;
    c.index_n_heads = 64;
    c.index_head_dim = 128;
    c.index_topk = 512;
    c.num_mtp_layers = 1;
  } else {
    return InvalidArgument("unknown preset '" + name + "' (tiny, mid, flash-l8)");
  }
  DSINFER_RETURN_IF_ERROR(c.Validate());
  return c;
}

Status WriteRandomModel(const DeepseekV4Config& c, const std::string& dir, uint64_t seed,
                        WeightFormat format) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Internal("cannot create " + dir + ": " + ec.message());
  Writer w(seed, format);
  const int64_t V = c.vocab_size, D = c.hidden_size;
  // Large models (real dimensions) are written as one shard per layer plus an index, so memory
  // holds one layer at a time; small ones as a single model.safetensors.
  const bool sharded = D >= 2048;
  const int num_shards = c.num_layers + c.num_mtp_layers + 1;
  int shard = 0;
  auto flush = [&]() -> Status {
    if (!sharded) return Status::Ok();
    char file[64];
    std::snprintf(file, sizeof(file), "model-%05d-of-%05d.safetensors", ++shard, num_shards);
    return w.Flush(dir, file);
  };
  w.Plain("embed.weight", {V, D}, w.Values("embed.weight", V * D, 0.0f, 1.0f));
  w.Linear("head", V, D, Kind::kPlain);
  w.Norm("norm.weight", D);
  w.HcHead("", c);
  DSINFER_RETURN_IF_ERROR(flush());
  for (int l = 0; l < c.num_layers; ++l) {
    w.Block("layers." + std::to_string(l) + ".", c, c.compress_ratios[l], c.hash_layers[l]);
    DSINFER_RETURN_IF_ERROR(flush());
  }
  for (int k = 0; k < c.num_mtp_layers; ++k) {
    const std::string p = "mtp." + std::to_string(k) + ".";
    w.Linear(p + "e_proj", D, D, Kind::kLinear);
    w.Linear(p + "h_proj", D, D, Kind::kLinear);
    w.Norm(p + "enorm.weight", D);
    w.Norm(p + "hnorm.weight", D);
    w.Norm(p + "norm.weight", D);
    w.HcHead(p, c);
    w.Block(p, c, c.mtp_compress_ratio, false);
    DSINFER_RETURN_IF_ERROR(flush());
  }
  if (sharded) {
    std::string index = "{\"metadata\": {\"total_size\": " + std::to_string(w.total_bytes()) +
                        "}, \"weight_map\": {";
    bool first = true;
    for (const auto& [name, file] : w.weight_map()) {
      index += (first ? "\"" : ", \"") + name + "\": \"" + file + "\"";
      first = false;
    }
    index += "}}\n";
    std::ofstream idx(std::filesystem::path(dir) / "model.safetensors.index.json");
    idx << index;
    if (!idx) return Internal("cannot write model.safetensors.index.json in " + dir);
  } else {
    DSINFER_RETURN_IF_ERROR(w.writer().Write((std::filesystem::path(dir) / "model.safetensors").string()));
  }
  DeepseekV4Config written = c;
  if (format == WeightFormat::kFp8 || format == WeightFormat::kOfficial) written.fp8_block_size = 128;
  std::string text = io::DeepseekV4ConfigToJson(written);
  std::ofstream out(std::filesystem::path(dir) / "config.json");
  out << text;
  if (!out) return Internal("cannot write config.json in " + dir);
  return Status::Ok();
}

}  // namespace dsinfer::model::deepseek_v4
