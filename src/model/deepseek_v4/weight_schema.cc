#include "model/deepseek_v4/weight_schema.h"

#include <cmath>
#include <cstring>

#include "base/check.h"

namespace dsinfer::model::deepseek_v4 {

namespace {

class SchemaBuilder : public SchemaWriter {
 public:
  explicit SchemaBuilder(const io::DeepseekV4Config& c) : c_(c) {}

  void HcHead(const std::string& p) {
    Fp32(p + "hc_head_fn", {c_.hc_mult, c_.hc_mult * c_.hidden_size}, 0.0f, 0.1f);
    Fp32(p + "hc_head_base", {c_.hc_mult}, 0.0f, 0.5f);
    Fp32(p + "hc_head_scale", {1}, 1.0f, 0.2f);
  }

  // CSA (overlap): width 2 * dim; HCA: dim.
  void Compressor(const std::string& p, int rate, int64_t dim, bool overlap) {
    const int64_t width = overlap ? 2 * dim : dim;
    Linear(p + "wkv", width, c_.hidden_size, LinearClass::kPlain);
    Linear(p + "wgate", width, c_.hidden_size, LinearClass::kPlain);
    Fp32(p + "ape", {rate, width}, 0.0f, 0.5f);
    Norm(p + "norm.weight", dim);
  }

  void Block(const std::string& p, int rate, bool hash) {
    const auto& c = c_;
    const int64_t D = c.hidden_size, d = c.head_dim;
    BlockSites(p, c);
    const std::string a = p + "attn.";
    LatentAttention(a, c);
    if (rate != 0) {
      const bool csa = rate == c.csa_rate;
      Compressor(a + "compressor.", rate, d, csa);
      if (csa) {
        Linear(a + "indexer.wq_b", int64_t{c.index_n_heads} * c.index_head_dim, c.q_lora_rank,
               LinearClass::kQuantized);
        Linear(a + "indexer.weights_proj", c.index_n_heads, D, LinearClass::kPlain);
        Compressor(a + "indexer.compressor.", rate, c.index_head_dim, true);
      }
    }
    const std::string f = p + "ffn.";
    Linear(f + "gate", c.n_routed_experts, D, LinearClass::kPlain);
    if (hash) {
      Push({f + "gate.tid2eid",
            TensorKind::kTid2eid,
            LinearClass::kNone,
            {c.vocab_size, c.num_experts_per_tok},
            layer(),
            0.0f,
            0.0f});
    } else {
      Fp32(f + "gate.bias", {c.n_routed_experts}, 0.0f, 0.1f);
    }
    Experts(f, c, c.n_shared_experts > 0);
  }

  std::vector<TensorSpec> Build() {
    const int64_t V = c_.vocab_size, D = c_.hidden_size;
    Linear("embed", V, D, LinearClass::kPlain, 1.0f);
    if (!c_.tie_word_embeddings) Linear("head", V, D, LinearClass::kPlain);
    Norm("norm.weight", D);
    HcHead("");
    for (int l = 0; l < c_.num_layers; ++l) {
      set_layer(l);
      Block("layers." + std::to_string(l) + ".", c_.compress_ratios[l], c_.hash_layers[l]);
    }
    for (int k = 0; k < c_.num_mtp_layers; ++k) {
      set_layer(c_.num_layers + k);
      const std::string p = "mtp." + std::to_string(k) + ".";
      Linear(p + "e_proj", D, D, LinearClass::kQuantized);
      Linear(p + "h_proj", D, D, LinearClass::kQuantized);
      Norm(p + "enorm.weight", D);
      Norm(p + "hnorm.weight", D);
      Norm(p + "norm.weight", D);
      HcHead(p);
      Block(p, c_.mtp_compress_ratio, false);
    }
    return Take();
  }

 private:
  const io::DeepseekV4Config& c_;
};

}  // namespace

void SchemaWriter::Linear(const std::string& name, int64_t out, int64_t in, LinearClass cls,
                          float std) {
  Push({name,
        TensorKind::kLinear,
        cls,
        {out, in},
        layer_,
        0.0f,
        std > 0 ? std : 1.0f / std::sqrt(static_cast<float>(in))});
}

void SchemaWriter::Norm(const std::string& name, int64_t n) {
  Push({name, TensorKind::kNorm, LinearClass::kNone, {n}, layer_, 1.0f, 0.1f});
}

void SchemaWriter::Fp32(const std::string& name, std::vector<int64_t> shape, float mean,
                        float std) {
  Push({name, TensorKind::kFp32, LinearClass::kNone, std::move(shape), layer_, mean, std});
}

std::vector<TensorSpec> WeightSchema(const io::DeepseekV4Config& config) {
  return SchemaBuilder(config).Build();
}

WeightSchemaIndex::WeightSchemaIndex(const io::DeepseekV4Config& config)
    : WeightSchemaIndex(WeightSchema(config)) {}

WeightSchemaIndex::WeightSchemaIndex(std::vector<TensorSpec> specs) : specs_(std::move(specs)) {
  by_name_.reserve(specs_.size());
  for (size_t i = 0; i < specs_.size(); ++i) by_name_[specs_[i].name] = i;
}

const TensorSpec& WeightSchemaIndex::Get(const std::string& name) const {
  auto it = by_name_.find(name);
  DSINFER_CHECK_MSG(it != by_name_.end(), name.c_str());
  return specs_[it->second];
}

StatusOr<LinearTensor> FindLinear(const io::Checkpoint& ckpt, const TensorSpec& spec,
                                  int fp8_block) {
  DSINFER_CHECK(spec.kind == TensorKind::kLinear && spec.shape.size() == 2);
  const int64_t rows = spec.shape[0], cols = spec.shape[1];
  const std::string wname = spec.name + ".weight";
  LinearTensor t;
  DSINFER_ASSIGN_OR_RETURN(t.weight, ckpt.Get(wname));
  switch (t.weight->dtype) {
    case DType::kF32:
      t.storage = LinearStorage::kF32;
      break;
    case DType::kBF16:
      t.storage = LinearStorage::kBf16;
      break;
    case DType::kF16:
      t.storage = LinearStorage::kF16;
      break;
    case DType::kF8E4M3:
      t.storage = LinearStorage::kFp8;
      break;
    case DType::kI8:
    case DType::kU8:
      t.storage = LinearStorage::kFp4;
      break;
    default:
      return DataLoss("tensor '" + wname + "' has unsupported dtype " +
                      std::string(DTypeName(t.weight->dtype)));
  }
  std::string expected = "[";  // (built in steps: GCC 12's -Wrestrict misfires on "[" + ...)
  expected += std::to_string(rows);
  expected += ", ";
  expected += std::to_string(cols);
  expected += "]";
  if (!t.quantized()) {
    if (t.weight->shape != spec.shape) {
      return DataLoss("tensor '" + wname + "' has shape " + t.weight->ShapeString() +
                      ", expected " + expected);
    }
    return t;
  }
  const bool fp4 = t.storage == LinearStorage::kFp4;
  const int64_t want_bytes = fp4 ? rows * cols / 2 : rows * cols;
  if ((fp4 && cols % 2 != 0) || static_cast<int64_t>(t.weight->nbytes) != want_bytes) {
    return DataLoss("tensor '" + wname + "' has shape " + t.weight->ShapeString() + ", expected " +
                    expected + (fp4 ? " as packed FP4" : " as FP8"));
  }
  t.scale = ckpt.Find(spec.name + ".scale");
  if (!t.scale) t.scale = ckpt.Find(spec.name + ".weight_scale_inv");
  if (!t.scale) return DataLoss("quantized tensor '" + wname + "' has no scale");
  if (t.scale->dtype != DType::kF8E8M0 && t.scale->dtype != DType::kF32) {
    return DataLoss("the scale of '" + spec.name + "' must be F8_E8M0 or F32");
  }
  if (fp4 && (t.scale->dtype != DType::kF8E8M0 || cols % 32 != 0)) {
    return DataLoss("FP4 tensor '" + spec.name + "' needs ue8m0 scales per 32 columns");
  }
  t.scale_f32 = t.scale->dtype == DType::kF32;
  if (!fp4 && fp8_block <= 0)
    return DataLoss("FP8 tensor '" + spec.name + "' without a block size");
  const int64_t scales =
      fp4 ? rows * (cols / 32)
          : ((rows + fp8_block - 1) / fp8_block) * ((cols + fp8_block - 1) / fp8_block);
  if (static_cast<int64_t>(t.scale->nbytes) != scales * (t.scale_f32 ? 4 : 1)) {
    return DataLoss("the scale of '" + spec.name + "' has shape " + t.scale->ShapeString() +
                    ", which does not fit the weight " + expected);
  }
  return t;
}

StatusOr<std::vector<int32_t>> ReadTid2eid(const io::Checkpoint& ckpt, const TensorSpec& spec,
                                           int64_t experts) {
  DSINFER_ASSIGN_OR_RETURN(const io::TensorView* t, ckpt.GetChecked(spec.name, spec.shape));
  if (t->dtype != DType::kI64 && t->dtype != DType::kI32) {
    return DataLoss("tensor '" + spec.name + "' must be I64 or I32");
  }
  std::vector<int32_t> ids(static_cast<size_t>(t->numel()));
  for (int64_t i = 0; i < t->numel(); ++i) {
    int64_t v;
    if (t->dtype == DType::kI64) {
      std::memcpy(&v, t->data + i * 8, 8);
    } else {
      int32_t v32;
      std::memcpy(&v32, t->data + i * 4, 4);
      v = v32;
    }
    if (v < 0 || v >= experts) {
      return DataLoss("tensor '" + spec.name + "' holds expert id " + std::to_string(v) +
                      " outside [0, " + std::to_string(experts) + ")");
    }
    ids[i] = static_cast<int32_t>(v);
  }
  return ids;
}

}  // namespace dsinfer::model::deepseek_v4
