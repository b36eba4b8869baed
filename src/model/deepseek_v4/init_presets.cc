#include "model/deepseek_v4/init_presets.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <numeric>

#include "base/fnv.h"
#include "base/thread_pool.h"
#include "io/quant.h"
#include "io/safetensors.h"
#include "model/deepseek_v4/weight_schema.h"

namespace dsinfer::model::deepseek_v4 {

namespace {

using io::DeepseekV4Config;

uint64_t SplitMix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t HashName(const std::string& s) { return Fnv1a(s.data(), s.size()); }

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

  // Conversion: the values come from this checkpoint instead of the generator.
  void set_source(const io::Checkpoint* source) { source_ = source; }
  Status error() {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

  // Random normal values with the given mean and std (or the source's tensor).
  std::vector<float> Values(const std::string& name, int64_t n, float mean, float std) {
    if (source_) return SourceValues(name, n);
    Rng rng(seed_, name);
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = mean + std * rng.Normal();
    return v;
  }

  void Linear(const std::string& name, int64_t out, int64_t in, Kind kind, float std) {
    std::vector<float> w = Values(name + ".weight", out * in, 0.0f, std);
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

  void Fp32(const std::string& name, std::vector<int64_t> shape, float mean, float std) {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    std::lock_guard<std::mutex> lock(mu_);
    writer_.AddF32(name, std::move(shape), Values(name, n, mean, std));
    names_.push_back(name);
  }

  void Tid2eid(const std::string& name, int64_t vocab, int k, int experts) {
    if (source_) {
      const io::TensorView* t = source_->Find(name);
      if (!t || t->numel() != vocab * k || (t->dtype != DType::kI64 && t->dtype != DType::kI32)) {
        Fail(InvalidArgument("conversion: " + name + " is missing or not an integer [" +
                             std::to_string(vocab) + ", " + std::to_string(k) + "] table"));
        return;
      }
      std::vector<uint8_t> bytes(static_cast<size_t>(vocab * k * 8));
      for (int64_t i = 0; i < vocab * k; ++i) {
        int64_t v = 0;
        if (t->dtype == DType::kI64) {
          std::memcpy(&v, t->data + i * 8, 8);
        } else {
          int32_t v32 = 0;
          std::memcpy(&v32, t->data + i * 4, 4);
          v = v32;
        }
        std::memcpy(bytes.data() + i * 8, &v, 8);
      }
      Add(name, DType::kI64, {vocab, k}, std::move(bytes));
      return;
    }
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

  // One tensor of the schema, in the writer's format (linears by their release class).
  void Write(const TensorSpec& t) {
    switch (t.kind) {
      case TensorKind::kLinear: {
        const Kind kind = t.linear == LinearClass::kQuantized ? Kind::kLinear
                          : t.linear == LinearClass::kExpert  ? Kind::kFp4Expert
                                                              : Kind::kPlain;
        Linear(t.name, t.shape[0], t.shape[1], kind, t.std);
        return;
      }
      case TensorKind::kNorm: {
        int64_t n = 1;
        for (int64_t d : t.shape) n *= d;
        Plain(t.name, t.shape, Values(t.name, n, t.mean, t.std));
        return;
      }
      case TensorKind::kFp32:
        Fp32(t.name, t.shape, t.mean, t.std);
        return;
      case TensorKind::kTid2eid:
        Tid2eid(t.name, t.shape[0], static_cast<int>(t.shape[1]), experts_);
        return;
    }
  }
  // The specs [begin, end): routed experts in parallel (each tensor's values depend only on
  // (seed, name), so the order changes nothing), the rest in order.
  void WriteAll(const std::vector<TensorSpec>& specs, size_t begin, size_t end) {
    for (size_t i = begin; i < end;) {
      size_t j = i;
      while (j < end && specs[j].routed_expert()) ++j;
      if (j == i) {
        Write(specs[i++]);
        continue;
      }
      pool_.ParallelFor(static_cast<int64_t>(j - i), [&](int64_t b, int64_t e) {
        for (int64_t k = b; k < e; ++k) Write(specs[i + static_cast<size_t>(k)]);
      });
      i = j;
    }
  }
  void set_experts(int experts) { experts_ = experts; }

  io::SafetensorsWriter& writer() { return writer_; }

 private:
  std::vector<float> SourceValues(const std::string& name, int64_t n) {
    const io::TensorView* t = source_->Find(name);
    if (!t) {
      Fail(NotFound("conversion: the source has no tensor " + name));
      return std::vector<float>(static_cast<size_t>(n));
    }
    std::string base = name;
    if (base.size() > 7 && base.compare(base.size() - 7, 7, ".weight") == 0)
      base.resize(base.size() - 7);
    auto v = io::DequantizeToF32(*t, source_->Find(base + ".scale"), t->shape, 128);
    if (!v.ok() || static_cast<int64_t>(v->size()) != n) {
      Fail(InvalidArgument("conversion: " + name +
                           (v.ok() ? " has " + std::to_string(v->size()) +
                                         " values, the schema wants " + std::to_string(n)
                                   : ": " + v.status().ToString())));
      return std::vector<float>(static_cast<size_t>(n));
    }
    return std::move(*v);
  }
  void Fail(Status st) {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_.ok()) error_ = std::move(st);
  }

  const io::Checkpoint* source_ = nullptr;
  Status error_;
  uint64_t seed_;
  WeightFormat format_;
  int experts_ = 0;
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

namespace {

Status WriteModel(const DeepseekV4Config& c, const std::string& dir, WeightFormat format,
                  Writer& w) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Internal("cannot create " + dir + ": " + ec.message());
  const int64_t D = c.hidden_size;
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
  // The schema in order: the global tensors, then one shard per layer (MTP layers included).
  const std::vector<TensorSpec> specs = WeightSchema(c);
  w.set_experts(c.n_routed_experts);
  for (size_t i = 0; i < specs.size();) {
    size_t j = i;
    while (j < specs.size() && specs[j].layer == specs[i].layer) ++j;
    w.WriteAll(specs, i, j);
    DSINFER_RETURN_IF_ERROR(w.error());
    DSINFER_RETURN_IF_ERROR(flush());
    i = j;
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

}  // namespace

Status WriteRandomModel(const DeepseekV4Config& c, const std::string& dir, uint64_t seed,
                        WeightFormat format) {
  Writer w(seed, format);
  return WriteModel(c, dir, format, w);
}

Status ConvertModel(const std::string& from_dir, const std::string& dir, WeightFormat format) {
  DSINFER_ASSIGN_OR_RETURN(const DeepseekV4Config c, io::LoadDeepseekV4Config(from_dir));
  DSINFER_ASSIGN_OR_RETURN(auto ckpt, io::Checkpoint::Open(from_dir));
  Writer w(0, format);
  w.set_source(ckpt.get());
  return WriteModel(c, dir, format, w);
}

}  // namespace dsinfer::model::deepseek_v4
