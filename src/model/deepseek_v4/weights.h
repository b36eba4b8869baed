// DeepSeek-V4 weights held as fp32 on the host (the CPU backend's working format), loaded from a
// checkpoint with the official tensor names (spec §4.2) and dequantized from BF16 / FP8 / FP4.
// Member names follow the checkpoint keys. Immutable after loading; safe to share across threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/gemm.h"
#include "base/status.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/deepseek_v4/weight_schema.h"

namespace dsinfer::model::deepseek_v4 {

// A linear layer's weight: [rows = out_features, cols = in_features] row-major, held as bf16 when
// that is exact (BF16 checkpoints, FP8/FP4 with power-of-two scales: half the memory and memory
// traffic of fp32, same results) and as fp32 otherwise (F32/F16 checkpoints, f32 block scales).
struct Matrix {
  std::vector<float> data;     // fp32 storage, or empty
  std::vector<uint16_t> bf16;  // bf16 storage, or empty
  int64_t rows = 0;
  int64_t cols = 0;
  // Loaded from an FP8 or FP4 tensor: products use the quantized activation (spec §2.12).
  bool act_quant = false;
  // The FP8-instruction numerics mode (io::DeepseekV4Config::fp8_mma; an FP8 / FP4 tensor only):
  // the codes and per-row scales its products take (io::MmaOperand); empty otherwise.
  std::vector<uint8_t> mma_e4m3;
  std::vector<float> mma_scale;
  int mma_bc = 0;
  backend::cpu::WeightView view() const {
    backend::cpu::WeightView v = data.empty() ? backend::cpu::WeightView::Bf16(bf16.data())
                                              : backend::cpu::WeightView(data.data());
    v.act_quant = act_quant;
    if (!mma_e4m3.empty()) v.mma = {mma_e4m3.data(), mma_scale.data(), cols, 1, mma_bc};
    return v;
  }
  int64_t bytes() const {
    return static_cast<int64_t>(data.size() * sizeof(float) + bf16.size() * sizeof(uint16_t));
  }
  // Row r as fp32 (embedding lookups).
  void CopyRow(int64_t r, float* out) const;
  // Rows of `a` then rows of `b` (same cols), in one matrix.
  static Matrix Stack(Matrix a, Matrix b);
};

struct HyperConnectionWeights {
  std::vector<float> fn;     // [(2 + hc) * hc, hc * D]
  std::vector<float> base;   // [(2 + hc) * hc]
  std::vector<float> scale;  // [3]
};

struct HyperHeadWeights {
  std::vector<float> fn;     // [hc, hc * D]
  std::vector<float> base;   // [hc]
  std::vector<float> scale;  // [1]
};

// The overlapping (CSA, width 2*dim) or plain (HCA, width dim) compressor of spec §2.6/§2.8.
struct CompressorWeights {
  int rate = 0;
  int dim = 0;              // output entry width (head_dim, or index_head_dim for the indexer)
  bool overlap = false;     // CSA: Ca/Cb series, projections are 2*dim wide
  Matrix wkv_wgate;         // [2 * width, D]: wkv rows then wgate rows (width = dim or 2*dim)
  std::vector<float> ape;   // [rate, width]
  std::vector<float> norm;  // [dim]
  int width() const { return overlap ? 2 * dim : dim; }
};

struct IndexerWeights {
  Matrix wq_b;          // [index_n_heads * index_head_dim, q_lora_rank]
  Matrix weights_proj;  // [index_n_heads, D]
  CompressorWeights compressor;
};

// The projections of the latent shared-K=V attention that every DeepSeek-V4-family layer has
// (V4.1's too): the query's low-rank path, the K=V latent, the grouped output, the sinks.
struct LatentAttentionWeights {
  Matrix wq_a;                   // [q_lora_rank, D]
  std::vector<float> q_norm;     // [q_lora_rank]
  Matrix wq_b;                   // [H * d, q_lora_rank]
  Matrix wkv;                    // [d, D]
  std::vector<float> kv_norm;    // [d]
  Matrix wo_a;                   // [o_groups * o_lora_rank, H * d / o_groups]
  Matrix wo_b;                   // [D, o_groups * o_lora_rank]
  std::vector<float> attn_sink;  // [H]
};

struct AttentionWeights : LatentAttentionWeights {
  int compress_rate = 0;  // 0: window only
  std::unique_ptr<CompressorWeights> compressor;
  std::unique_ptr<IndexerWeights> indexer;  // CSA only
};

struct ExpertWeights {
  Matrix w1;  // gate [I, D]
  Matrix w3;  // up   [I, D]
  Matrix w2;  // down [D, I]
};

struct MoeWeights {
  Matrix gate;                   // [E, D]
  std::vector<float> bias;       // [E] selection-only bias (top-k layers); empty for hash layers
  std::vector<int32_t> tid2eid;  // [V, k] for hash layers; empty otherwise
  std::vector<ExpertWeights> experts;
  std::unique_ptr<ExpertWeights> shared;
};

// A decoder block's two sublayer sites (attention, FFN): each one's mHC and RMSNorm weights (every
// DeepSeek-V4-family block has them).
struct BlockSites {
  std::vector<float> attn_norm;  // [D]
  std::vector<float> ffn_norm;   // [D]
  HyperConnectionWeights hc_attn;
  HyperConnectionWeights hc_ffn;
};

struct BlockWeights : BlockSites {
  AttentionWeights attn;
  MoeWeights ffn;
};

struct MtpWeights {
  Matrix e_proj;             // [D, D]
  Matrix h_proj;             // [D, D]
  std::vector<float> enorm;  // [D]
  std::vector<float> hnorm;  // [D]
  std::vector<float> norm;   // [D]
  HyperHeadWeights hc_head;
  BlockWeights block;
};

// Reads the tensors of a weight schema from a checkpoint into the CPU's working formats: a linear
// (`<name>.weight` + its scale when FP8 / FP4) dequantized into a Matrix, a plain tensor as fp32,
// and the groups every DeepSeek-V4-family block has. Both families' loaders use it. A missing
// tensor, a wrong shape or dtype is DataLoss naming it; asking for a name the schema lacks is our
// bug (DSINFER_CHECK).
class TensorLoader {
 public:
  // fp8_mma: FP8 / FP4 matrices also keep their codes for the FP8-instruction mode (Matrix).
  TensorLoader(const io::Checkpoint& ckpt, std::vector<TensorSpec> schema, int fp8_block_size,
               bool fp8_mma = false);

  StatusOr<Matrix> LoadMatrix(const std::string& name) const;
  StatusOr<std::vector<float>> LoadVector(const std::string& name) const;
  // `<prefix>_fn`, `_base`, `_scale` (prefix: "layers.N.hc_attn").
  Status LoadHc(const std::string& prefix, HyperConnectionWeights* hc) const;
  // `<prefix>w1`, `w3`, `w2` (prefix: "layers.N.ffn.experts.E.").
  Status LoadExpert(const std::string& prefix, ExpertWeights* e) const;
  // The `routed` experts `<prefix>experts.E.` and, if `shared`, `<prefix>shared_experts.` into m
  // (prefix: "layers.N.ffn."; the router's tensors are the family's). With `holds`, only the
  // routed experts it accepts (expert parallelism: a rank's share); the others stay empty.
  Status LoadExperts(const std::string& prefix, int routed, bool shared, MoeWeights* m,
                     const std::function<bool(int)>& holds = {}) const;
  // The projections under `<prefix>` ("layers.N.attn.").
  Status LoadLatentAttention(const std::string& prefix, LatentAttentionWeights* a) const;
  // The sublayer sites' norms and mHC under `<prefix>` ("layers.N.").
  Status LoadBlockSites(const std::string& prefix, BlockSites* b) const;
  const WeightSchemaIndex& schema() const { return schema_; }

 private:
  const io::Checkpoint& ckpt_;
  WeightSchemaIndex schema_;
  int fp8_block_size_;
  bool fp8_mma_;
};

// Which routed experts a load keeps: (MoE layer, expert) -> keep (empty: every one).
using ExpertFilter = std::function<bool(int moe_layer, int expert)>;

struct ModelWeights {
  Matrix embed;             // [V, D]
  Matrix head;              // [V, D]
  std::vector<float> norm;  // [D]
  HyperHeadWeights hc_head;
  std::vector<BlockWeights> layers;
  std::vector<MtpWeights> mtp;  // empty when the checkpoint has no mtp.* tensors

  // Loads every tensor the config calls for; any missing tensor, wrong shape or bad dtype is an
  // error naming the tensor. MTP weights are loaded when the checkpoint has them. With `holds`,
  // only the routed experts it accepts (ExpertFilter).
  static StatusOr<std::unique_ptr<ModelWeights>> Load(const io::Checkpoint& ckpt,
                                                      const io::DeepseekV4Config& config,
                                                      const ExpertFilter& holds = {});
  // MoE layer `moe_layer`: the decoder layers' 0 .. L - 1, then the MTP layers' L, L + 1, ...
  int moe_layers() const { return static_cast<int>(layers.size() + mtp.size()); }
  MoeWeights& MoeLayer(int moe_layer) {
    const size_t l = static_cast<size_t>(moe_layer);
    return l < layers.size() ? layers[l].ffn : mtp[l - layers.size()].block.ffn;
  }
};

}  // namespace dsinfer::model::deepseek_v4
