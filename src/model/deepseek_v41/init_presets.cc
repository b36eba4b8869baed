#include "model/deepseek_v41/init_presets.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/dtype.h"
#include "base/fnv.h"
#include "io/safetensors.h"
#include "model/deepseek_v41/engram.h"
#include "model/deepseek_v41/weight_schema.h"

namespace dsinfer::model::deepseek_v41 {

namespace {

uint64_t SplitMix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// normal(mean, std) values keyed by (seed, name): Box-Muller on SplitMix64.
std::vector<float> Values(uint64_t seed, const std::string& name, int64_t n, float mean,
                          float std) {
  uint64_t state = seed * 0x9e3779b97f4a7c15ull ^ Fnv1a(name.data(), name.size());
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double u1 = std::max(static_cast<double>(SplitMix(state) >> 11) * 0x1p-53, 1e-300);
    const double u2 = static_cast<double>(SplitMix(state) >> 11) * 0x1p-53;
    v[i] = mean + std * static_cast<float>(std::sqrt(-2.0 * std::log(u1)) *
                                           std::cos(6.283185307179586 * u2));
  }
  return v;
}

}  // namespace

std::vector<std::string> PresetNames() {
  return {"v41-tiny", "v41-tiny-engram", "v41-tiny-dspark", "v41-flash-l8"};
}

StatusOr<io::DeepseekV41Config> PresetConfig(const std::string& name) {
  if (name == "v41-flash-l8") {
    // V4.1-Flash real dimensions (the config's defaults: hidden 5120, 64 heads x 512, 384 experts
    // top-6, indexer 32 x 128 top-512, candidates 2,048 blocks x 8, SWA 128), 8 layers with its
    // schedule's parts: 2 window-only, a ratio-2 group (source 2, Reuse 3, 4), a ratio-1 group
    // (source 5, the candidate source; Reuse 6; Reindex 7), Engram at layer 1 with tables cut to
    // ~1.5 GB (engram_vocab_size 250,000 instead of 16M: 24 columns of ~250k rows x 256 B).
    io::DeepseekV41Config c;
    c.num_layers = 8;
    c.compress_ratios = {0, 0, 2, 2, 2, 1, 1, 1};
    c.kv_source_layer_ids = {2, 5};
    c.index_source_layer_ids = {2, 5, 7};
    c.candidate_source_layer_id = 5;
    c.compress_yarn = {true, 16.0, 65536.0, 32.0, 1.0, true};
    c.max_position_embeddings = 1048576;
    c.engram_layer_ids = {1};
    c.engram_vocab_size = 250000;
    c.engram_num_embeddings = EngramRowsNeeded(c);
    // No draft layers (the release has 3; `bench --dspark` adds them); the drafter's other keys
    // are the release's, its taps the default ones.
    c.dspark_target_layer_ids = c.DefaultDSparkTargets();
    DSINFER_RETURN_IF_ERROR(c.Validate());
    return c;
  }
  if (name != "v41-tiny" && name != "v41-tiny-engram" && name != "v41-tiny-dspark") {
    return NotFound("no DeepSeek-V4.1 preset named '" + name + "'");
  }
  io::DeepseekV41Config c;
  c.vocab_size = 129280;
  c.hidden_size = 64;
  c.num_layers = 8;
  c.num_heads = 4;
  c.head_dim = 64;
  c.rope_head_dim = 16;
  c.q_lora_rank = 32;
  c.o_groups = 2;
  c.o_lora_rank = 16;
  c.n_routed_experts = 6;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = 32;
  c.routed_scaling_factor = 1.5;
  c.swiglu_limit = 3.0;
  c.sliding_window = 8;
  c.rope_theta = 10000.0;
  c.compress_rope_theta = 40000.0;
  c.compress_yarn = {true, 4.0, 64.0, 32.0, 1.0, true};
  c.max_position_embeddings = 4096;
  c.compress_ratios = {0, 0, 2, 2, 2, 2, 1, 1};
  c.kv_source_layer_ids = {2, 4, 6};
  c.index_source_layer_ids = {2, 4, 6, 7};
  c.candidate_source_layer_id = 6;
  c.candidate_topk_blocks = 3;
  c.candidate_block_size = 2;
  c.index_n_heads = 16;
  c.index_head_dim = 32;
  c.index_topk = 4;
  c.hc_mult = 4;
  c.hc_sinkhorn_iters = 20;
  c.num_nextn_predict_layers = 0;
  if (name == "v41-tiny-engram") {
    c.engram_layer_ids = {1, 5};
    c.engram_vocab_size = 1000;
    c.engram_max_ngram_size = 4;
    c.engram_n_heads = 2;
    c.engram_head_dim = 32;
    c.engram_pad_id = 2;
    c.engram_compressed_vocab_size = c.vocab_size / 2;
    c.engram_num_embeddings = EngramRowsNeeded(c);
  }
  if (name == "v41-tiny-dspark" || name == "v41-tiny-engram") {
    c.num_nextn_predict_layers = 3;
    c.dspark_block_size = 5;
    c.dspark_noise_token_id = 128799;                      // the release's
    c.dspark_target_layer_ids = c.DefaultDSparkTargets();  // layers 5, 6, 7
    c.dspark_markov_rank = 16;
    c.dspark_n_routed_experts = 4;
    c.dspark_num_experts_per_tok = 2;
  }
  DSINFER_RETURN_IF_ERROR(c.Validate());
  return c;
}

Status WriteRandomModel(const io::DeepseekV41Config& config, const std::string& dir, uint64_t seed,
                        deepseek_v4::WeightFormat format) {
  using deepseek_v4::WeightFormat;
  if (format != WeightFormat::kF32 && format != WeightFormat::kBf16) {
    return Unimplemented("DeepSeek-V4.1 presets are written with f32 or bf16 weights");
  }
  DSINFER_RETURN_IF_ERROR(config.Validate());
  if (config.has_dspark()) DSINFER_RETURN_IF_ERROR(config.ValidateDSpark());
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Internal("cannot create " + dir + ": " + ec.message());
  io::SafetensorsWriter writer;
  std::vector<TensorSpec> schema = WeightSchema(config);
  for (TensorSpec& spec : DSparkWeightSchema(config)) schema.push_back(std::move(spec));
  for (const TensorSpec& spec : schema) {
    int64_t n = 1;
    for (int64_t s : spec.shape) n *= s;
    const std::string name = spec.kind == TensorKind::kLinear ? spec.name + ".weight" : spec.name;
    std::vector<float> v = Values(seed, name, n, spec.mean, spec.std);
    if (format == WeightFormat::kF32 || spec.kind == TensorKind::kFp32) {
      writer.AddF32(name, spec.shape, v);
      continue;
    }
    std::vector<uint8_t> bytes(v.size() * 2);
    for (size_t i = 0; i < v.size(); ++i) {
      const uint16_t b = FloatToBf16(v[i]);
      std::memcpy(bytes.data() + 2 * i, &b, 2);
    }
    writer.Add(name, DType::kBF16, spec.shape, std::move(bytes));
  }
  DSINFER_RETURN_IF_ERROR(
      writer.Write((std::filesystem::path(dir) / "model.safetensors").string()));
  std::ofstream out(std::filesystem::path(dir) / "config.json");
  out << io::DeepseekV41ConfigToJson(config);
  if (!out) return Internal("cannot write config.json in " + dir);
  if (!config.engram_layer_ids.empty()) {
    // A stand-in for the tokenizer-derived map: token i -> i mod the compressed vocabulary.
    std::vector<int32_t> map(static_cast<size_t>(config.vocab_size));
    const int64_t cv = std::max<int64_t>(1, config.engram_compressed_vocab_size);
    for (size_t i = 0; i < map.size(); ++i) map[i] = static_cast<int32_t>(i % cv);
    DSINFER_RETURN_IF_ERROR(WriteEngramTokenMap(dir, cv, map));
  }
  return Status::Ok();
}

}  // namespace dsinfer::model::deepseek_v41
