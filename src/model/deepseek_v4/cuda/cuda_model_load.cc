// Loading the CUDA model: from a checkpoint (weights kept in their formats) or device-random
// weights in the official formats (benchmarks).
#include "model/deepseek_v4/cuda/cuda_model_impl.h"

namespace dsinfer::model::deepseek_v4::cuda {

namespace {

// The shapes a config gives the kernels, checked by the kernels' own Validate() (their limits
// live with the kernels): Unimplemented naming the limit, before any weight is read.
Status CheckSupported(const io::DeepseekV4Config& c) {
  const int hc = static_cast<int>(c.hc_mult);
  gpu::SparseAttentionParams ap;
  ap.dim = static_cast<int>(c.head_dim);
  ap.rope_dim = static_cast<int>(c.rope_head_dim);
  DSINFER_RETURN_IF_ERROR(ap.Validate());
  for (int64_t i = 0; i <= c.num_layers; ++i) {
    const int64_t rate = i < c.num_layers ? c.compress_ratios[i] : c.mtp_compress_ratio;
    if (rate == 0) continue;
    gpu::CompressEmitParams cp;
    cp.rate = static_cast<int>(rate);
    cp.overlap = rate == c.csa_rate;
    DSINFER_RETURN_IF_ERROR(cp.Validate());
    if (rate == c.csa_rate) {
      gpu::IndexerTopKParams ip;
      ip.heads = static_cast<int>(c.index_n_heads);
      ip.head_dim = static_cast<int>(c.index_head_dim);
      ip.rope_dim = static_cast<int>(c.rope_head_dim);
      DSINFER_RETURN_IF_ERROR(ip.Validate());
    }
  }
  gpu::HcMixParams mp;
  mp.nout = (2 + hc) * hc;
  DSINFER_RETURN_IF_ERROR(mp.Validate());
  gpu::HcPreFinishParams pf;
  pf.hc = hc;
  DSINFER_RETURN_IF_ERROR(pf.Validate());
  gpu::HcHeadFinishParams hf;
  hf.hc = hc;
  DSINFER_RETURN_IF_ERROR(hf.Validate());
  gpu::MoeRouteParams rp;
  rp.E = static_cast<int>(c.n_routed_experts);
  rp.K = static_cast<int>(c.num_experts_per_tok);
  DSINFER_RETURN_IF_ERROR(rp.Validate());
  gpu::RmsNormRopeParams np;  // the kv rows and the query heads: RMSNorm + RoPE of head_dim rows
  np.norm.dim = c.head_dim;
  np.heads = 1;
  np.rope_dim = static_cast<int>(c.rope_head_dim);
  DSINFER_RETURN_IF_ERROR(np.Validate());
  return Status::Ok();
}

// ---- loading from a checkpoint ----

class GpuLoader {
 public:
  GpuLoader(const io::Checkpoint& ckpt, CudaModel::Impl* m) : ckpt_(ckpt), m_(m) {}

  // dest: where an unquantized matrix goes (its bytes there), instead of a buffer of its own.
  StatusOr<WeightRef> Matrix(const std::string& name, int64_t rows, int64_t cols,
                             void* dest = nullptr) {
    DSINFER_ASSIGN_OR_RETURN(const io::TensorView* w, ckpt_.Get(name + ".weight"));
    const io::TensorView* s = ckpt_.Find(name + ".scale");
    if (!s) s = ckpt_.Find(name + ".weight_scale_inv");
    WeightRef r;
    r.n = rows;
    r.k = cols;
    r.block = m_->c.fp8_block_size;
    switch (w->dtype) {
      case DType::kF32: r.format = WeightFormat::kF32; break;
      case DType::kBF16: r.format = WeightFormat::kBf16; break;
      case DType::kF8E4M3: r.format = WeightFormat::kFp8; break;
      case DType::kI8:
      case DType::kU8: r.format = WeightFormat::kFp4; break;
      case DType::kF16: {  // rare: widen to fp32
        DSINFER_ASSIGN_OR_RETURN(auto v, io::DequantizeToF32(*w, nullptr, {rows, cols}, r.block));
        r.format = WeightFormat::kF32;
        r.data = m_->UploadF32(v);
        return r;
      }
      default:
        return DataLoss("tensor '" + name + ".weight' has unsupported dtype " + std::string(DTypeName(w->dtype)));
    }
    const int64_t expect = r.format == WeightFormat::kFp4 ? rows * cols / 2
                                                          : rows * cols * (r.format == WeightFormat::kF32 ? 4 : r.format == WeightFormat::kBf16 ? 2 : 1);
    if (static_cast<int64_t>(w->nbytes) != expect) {
      return DataLoss("tensor '" + name + ".weight' has shape " + w->ShapeString() + ", expected [" +
                      std::to_string(rows) + ", " + std::to_string(cols) + "]");
    }
    const bool quantized = gpu::IsQuantized(r.format);
    if (quantized) {
      std::string why;
      if (!gpu::QLinearSupports(r, false, &why)) {
        return Unimplemented("tensor '" + name + ".weight' [" + std::to_string(rows) + ", " +
                             std::to_string(cols) + "]: the CUDA FP8/FP4 linear does not take it: " + why);
      }
    }
    const int64_t device_bytes =
        r.format == WeightFormat::kFp8 ? gpu::Fp8TiledBytes(rows, cols) : expect;
    void* data = dest && !quantized ? dest : m_->Alloc<uint8_t>(device_bytes);
    if (quantized) {  // the tensor-core fragment order (TileFp8ForMma / TileFp4ForMma)
      std::vector<uint8_t> tiled(static_cast<size_t>(device_bytes));
      if (r.format == WeightFormat::kFp8)
        gpu::TileFp8ForMma(static_cast<const uint8_t*>(w->data), tiled.data(), rows, cols);
      else
        gpu::TileFp4ForMma(static_cast<const uint8_t*>(w->data), tiled.data(), rows, cols);
      gpu::CopyToDeviceSync(data, tiled.data(), tiled.size());
    } else {
      gpu::CopyToDeviceSync(data, w->data, w->nbytes);
    }
    r.data = data;
    if (quantized) {
      if (!s) return DataLoss("quantized tensor '" + name + ".weight' has no scale");
      if (s->dtype != DType::kF8E8M0 && s->dtype != DType::kF32) {
        return DataLoss("scale of '" + name + "' must be F8_E8M0 or F32");
      }
      if (r.format == WeightFormat::kFp4 && (s->dtype != DType::kF8E8M0 || cols % 32 != 0)) {
        return DataLoss("FP4 tensor '" + name + "' needs ue8m0 per-32 scales");
      }
      r.scale_format = s->dtype == DType::kF32 ? gpu::ScaleFormat::kF32 : gpu::ScaleFormat::kUe8m0;
      const int64_t want = r.format == WeightFormat::kFp4
                               ? rows * (cols / 32)
                               : ((rows + r.block - 1) / r.block) * ((cols + r.block - 1) / r.block) *
                                     (s->dtype == DType::kF32 ? 4 : 1);
      if (static_cast<int64_t>(s->nbytes) != want) return DataLoss("scale of '" + name + "' has the wrong size");
      void* sd = m_->Alloc<uint8_t>(want);
      if (r.format == WeightFormat::kFp4) {  // the kernel's order and bias (TileFp4ScalesForMma)
        std::vector<uint8_t> tiled(static_cast<size_t>(want));
        gpu::TileFp4ScalesForMma(static_cast<const uint8_t*>(s->data), tiled.data(), rows, cols);
        gpu::CopyToDeviceSync(sd, tiled.data(), tiled.size());
      } else {
        gpu::CopyToDeviceSync(sd, s->data, s->nbytes);
      }
      r.scale = sd;
    }
    m_->weight_bytes += r.bytes();
    return r;
  }

  StatusOr<float*> Vector(const std::string& name, const std::vector<int64_t>& shape) {
    DSINFER_ASSIGN_OR_RETURN(const io::TensorView* t, ckpt_.GetChecked(name, shape));
    DSINFER_ASSIGN_OR_RETURN(auto v, io::DequantizeToF32(*t, nullptr, shape, 128));
    m_->weight_bytes += v.size() * 4;
    return m_->UploadF32(v);
  }

  // An fp32 matrix held as a plain vector (the mHC mixing weights).
  StatusOr<WeightRef> F32Matrix(const std::string& name, int64_t rows, int64_t cols) {
    DSINFER_ASSIGN_OR_RETURN(float* p, Vector(name, {rows, cols}));
    WeightRef r;
    r.format = WeightFormat::kF32;
    r.data = p;
    r.n = rows;
    r.k = cols;
    return r;
  }

  Status Hc(const std::string& prefix, HcW* hc) {
    const auto& c = m_->c;
    const int64_t mixn = (2 + c.hc_mult) * c.hc_mult;
    DSINFER_ASSIGN_OR_RETURN(hc->fn, F32Matrix(prefix + "_fn", mixn, c.hc_mult * c.hidden_size));
    DSINFER_ASSIGN_OR_RETURN(hc->base, Vector(prefix + "_base", {mixn}));
    DSINFER_ASSIGN_OR_RETURN(hc->scale, Vector(prefix + "_scale", {3}));
    return Status::Ok();
  }

  Status Compressor(const std::string& p, int rate, int dim, bool overlap, CompressorW* cw) {
    const auto& c = m_->c;
    cw->rate = rate;
    cw->dim = dim;
    cw->overlap = overlap;
    const int64_t width = cw->width();
    // Both bf16 (or both fp32): one buffer, wgate's rows after wkv's (kv_gate).
    const io::TensorView* kv = ckpt_.Find(p + "wkv.weight");
    const io::TensorView* gate = ckpt_.Find(p + "wgate.weight");
    const bool joint = kv && gate && kv->dtype == gate->dtype &&
                       (kv->dtype == DType::kBF16 || kv->dtype == DType::kF32);
    const int64_t elem = joint && kv->dtype == DType::kF32 ? 4 : 2;
    uint8_t* both = joint ? m_->Alloc<uint8_t>(2 * width * c.hidden_size * elem) : nullptr;
    DSINFER_ASSIGN_OR_RETURN(cw->wkv, Matrix(p + "wkv", width, c.hidden_size, both));
    DSINFER_ASSIGN_OR_RETURN(cw->wgate,
                             Matrix(p + "wgate", width, c.hidden_size,
                                    joint ? both + width * c.hidden_size * elem : nullptr));
    if (joint) {
      cw->kv_gate = cw->wkv;
      cw->kv_gate.n = 2 * width;
    }
    DSINFER_ASSIGN_OR_RETURN(cw->ape, Vector(p + "ape", {rate, width}));
    DSINFER_ASSIGN_OR_RETURN(cw->norm, Vector(p + "norm.weight", {dim}));
    return Status::Ok();
  }

  // Routed experts: each matrix kind packed into one buffer (expert e at e * stride).
  Status Experts(const std::string& p, ExpertsW* ex) {
    const auto& c = m_->c;
    const int E = c.n_routed_experts;
    const int64_t D = c.hidden_size, I = c.moe_intermediate_size;
    std::vector<const void*> tables[6];
    for (int e = 0; e < E; ++e) {
      const std::string ep = p + "experts." + std::to_string(e) + ".";
      DSINFER_ASSIGN_OR_RETURN(WeightRef w1, Matrix(ep + "w1", I, D));
      DSINFER_ASSIGN_OR_RETURN(WeightRef w3, Matrix(ep + "w3", I, D));
      DSINFER_ASSIGN_OR_RETURN(WeightRef w2, Matrix(ep + "w2", D, I));
      if (e == 0) {
        ex->w1 = w1; ex->w3 = w3; ex->w2 = w2;
        ex->bytes_per_expert = w1.bytes() + w3.bytes() + w2.bytes();
      } else if (w1.format != ex->w1.format || w2.format != ex->w2.format || w3.format != ex->w3.format ||
                 w1.scale_format != ex->w1.scale_format) {
        return DataLoss("routed experts of " + p + " mix weight formats");
      }
      tables[0].push_back(w1.data); tables[1].push_back(w1.scale);
      tables[2].push_back(w3.data); tables[3].push_back(w3.scale);
      tables[4].push_back(w2.data); tables[5].push_back(w2.scale);
    }
    m_->UploadExpertTables(tables, ex);
    return Status::Ok();
  }

  Status Block(const std::string& prefix, int rate, bool hash, BlockW* b) {
    const auto& c = m_->c;
    const int64_t D = c.hidden_size, H = c.num_heads, d = c.head_dim;
    const size_t before = m_->weight_bytes;
    DSINFER_ASSIGN_OR_RETURN(b->attn_norm, Vector(prefix + "attn_norm.weight", {D}));
    DSINFER_ASSIGN_OR_RETURN(b->ffn_norm, Vector(prefix + "ffn_norm.weight", {D}));
    DSINFER_RETURN_IF_ERROR(Hc(prefix + "hc_attn", &b->hc_attn));
    DSINFER_RETURN_IF_ERROR(Hc(prefix + "hc_ffn", &b->hc_ffn));
    const std::string ap = prefix + "attn.";
    DSINFER_ASSIGN_OR_RETURN(b->wq_a, Matrix(ap + "wq_a", c.q_lora_rank, D));
    DSINFER_ASSIGN_OR_RETURN(b->q_norm, Vector(ap + "q_norm.weight", {c.q_lora_rank}));
    DSINFER_ASSIGN_OR_RETURN(b->wq_b, Matrix(ap + "wq_b", H * d, c.q_lora_rank));
    DSINFER_ASSIGN_OR_RETURN(b->wkv, Matrix(ap + "wkv", d, D));
    DSINFER_ASSIGN_OR_RETURN(b->kv_norm, Vector(ap + "kv_norm.weight", {d}));
    DSINFER_ASSIGN_OR_RETURN(b->wo_a, Matrix(ap + "wo_a", int64_t{c.o_groups} * c.o_lora_rank, H * d / c.o_groups));
    DSINFER_ASSIGN_OR_RETURN(b->wo_b, Matrix(ap + "wo_b", D, int64_t{c.o_groups} * c.o_lora_rank));
    DSINFER_ASSIGN_OR_RETURN(b->sink, Vector(ap + "attn_sink", {H}));
    b->rate = rate;
    if (rate != 0) {
      const bool csa = rate == c.csa_rate;
      b->has_comp = true;
      DSINFER_RETURN_IF_ERROR(Compressor(ap + "compressor.", rate, static_cast<int>(d), csa, &b->comp));
      if (csa) {
        b->has_idx = true;
        DSINFER_ASSIGN_OR_RETURN(b->idx_wq_b, Matrix(ap + "indexer.wq_b",
                                                     int64_t{c.index_n_heads} * c.index_head_dim, c.q_lora_rank));
        DSINFER_ASSIGN_OR_RETURN(b->idx_weights_proj, Matrix(ap + "indexer.weights_proj", c.index_n_heads, D));
        DSINFER_RETURN_IF_ERROR(Compressor(ap + "indexer.compressor.", rate, c.index_head_dim, true, &b->idx_comp));
      }
    }
    const std::string fp = prefix + "ffn.";
    DSINFER_ASSIGN_OR_RETURN(b->gate, Matrix(fp + "gate", c.n_routed_experts, D));
    if (hash) {
      DSINFER_ASSIGN_OR_RETURN(const io::TensorView* t,
                               ckpt_.GetChecked(fp + "gate.tid2eid", {c.vocab_size, c.num_experts_per_tok}));
      if (t->dtype != DType::kI64 && t->dtype != DType::kI32) return DataLoss(fp + "gate.tid2eid must be I64 or I32");
      std::vector<int32_t> v(static_cast<size_t>(t->numel()));
      for (int64_t i = 0; i < t->numel(); ++i) {
        int64_t x;
        if (t->dtype == DType::kI64) {
          std::memcpy(&x, t->data + i * 8, 8);
        } else {
          int32_t x32;
          std::memcpy(&x32, t->data + i * 4, 4);
          x = x32;
        }
        if (x < 0 || x >= c.n_routed_experts) return DataLoss(fp + "gate.tid2eid holds an expert id out of range");
        v[i] = static_cast<int32_t>(x);
      }
      b->tid2eid = m_->Alloc<int32_t>(static_cast<int64_t>(v.size()));
      gpu::CopyToDeviceSync(b->tid2eid, v.data(), v.size() * 4);
      m_->weight_bytes += v.size() * 4;
    } else {
      DSINFER_ASSIGN_OR_RETURN(b->gate_bias, Vector(fp + "gate.bias", {c.n_routed_experts}));
    }
    const size_t before_experts = m_->weight_bytes;
    DSINFER_RETURN_IF_ERROR(Experts(fp, &b->experts));
    const size_t expert_total = m_->weight_bytes - before_experts;
    if (c.n_shared_experts > 0) {
      b->has_shared = true;
      const int64_t I = c.moe_intermediate_size;
      DSINFER_ASSIGN_OR_RETURN(b->sh_w1, Matrix(fp + "shared_experts.w1", I, D));
      DSINFER_ASSIGN_OR_RETURN(b->sh_w3, Matrix(fp + "shared_experts.w3", I, D));
      DSINFER_ASSIGN_OR_RETURN(b->sh_w2, Matrix(fp + "shared_experts.w2", D, I));
    }
    m_->dense_bytes += m_->weight_bytes - before - expert_total;
    return Status::Ok();
  }

 private:
  const io::Checkpoint& ckpt_;
  CudaModel::Impl* m_;
};

}  // namespace

StatusOr<std::unique_ptr<CudaModel>> CudaModel::Load(const std::string& model_dir,
                                                     const CudaModelOptions& options) {
  if (!gpu::DeviceAvailable()) return Unimplemented("no CUDA device");
  auto impl = std::make_unique<Impl>();
  DSINFER_ASSIGN_OR_RETURN(impl->c, io::LoadDeepseekV4Config(model_dir));
  DSINFER_RETURN_IF_ERROR(CheckSupported(impl->c));
  impl->opt = options;
  DSINFER_ASSIGN_OR_RETURN(auto ckpt, io::Checkpoint::Open(model_dir));
  const auto& c = impl->c;
  GpuLoader ld(*ckpt, impl.get());
  const int64_t V = c.vocab_size, D = c.hidden_size;
  DSINFER_ASSIGN_OR_RETURN(impl->embed, ld.Matrix("embed", V, D));
  if (c.tie_word_embeddings) {
    impl->head = impl->embed;  // the head reads the embedding matrix
  } else {
    DSINFER_ASSIGN_OR_RETURN(impl->head, ld.Matrix("head", V, D));
  }
  if ((impl->embed.format != WeightFormat::kBf16 && impl->embed.format != WeightFormat::kF32)) {
    return Unimplemented("CUDA backend: the embedding must be BF16 or F32");
  }
  DSINFER_ASSIGN_OR_RETURN(impl->norm, ld.Vector("norm.weight", {D}));
  DSINFER_ASSIGN_OR_RETURN(impl->hc_head.fn, ld.F32Matrix("hc_head_fn", c.hc_mult, c.hc_mult * D));
  DSINFER_ASSIGN_OR_RETURN(impl->hc_head.base, ld.Vector("hc_head_base", {c.hc_mult}));
  DSINFER_ASSIGN_OR_RETURN(impl->hc_head.scale, ld.Vector("hc_head_scale", {1}));
  impl->dense_bytes = impl->weight_bytes - impl->embed.bytes();
  impl->layers.resize(c.num_layers);
  for (int l = 0; l < c.num_layers; ++l) {
    DSINFER_RETURN_IF_ERROR(ld.Block("layers." + std::to_string(l) + ".", c.compress_ratios[l],
                                     c.hash_layers[l], &impl->layers[l]));
  }
  impl->AllocateState();
  impl->AllocateActivations();
  return std::unique_ptr<CudaModel>(new CudaModel(std::move(impl)));
}

namespace {

// Device-random weights in the official formats.
class RandomBuilder {
 public:
  RandomBuilder(CudaModel::Impl* m, uint64_t seed) : m_(m), seed_(seed) {}

  void Fill(void* p, int64_t count, gpu::RandomKind kind, float mean, float std) {
    gpu::RandomFillParams f;
    f.data = p; f.count = count; f.kind = kind; f.seed = seed_ * 1000003ull + counter_++;
    f.mean = mean; f.std = std;
    gpu::LaunchRandomFill(f, m_->stream.get());
  }
  static int ExpFor(double target) { return 127 + static_cast<int>(std::lround(std::log2(target))); }

  WeightRef Fp8(int64_t n, int64_t k) {
    WeightRef r;
    r.format = WeightFormat::kFp8; r.n = n; r.k = k; r.block = 128;
    r.scale_format = gpu::ScaleFormat::kUe8m0;
    const int64_t bytes = gpu::Fp8TiledBytes(n, k);  // random bytes: no layout to apply
    void* d = m_->Alloc<uint8_t>(bytes);
    Fill(d, bytes, gpu::RandomKind::kFp8, 0, 64.0f);
    const int64_t sn = ((n + 127) / 128) * ((k + 127) / 128);
    void* s = m_->Alloc<uint8_t>(sn);
    Fill(s, sn, gpu::RandomKind::kByte, static_cast<float>(ExpFor(1.0 / (64.0 * std::sqrt(double(k))))), 0);
    r.data = d; r.scale = s;
    m_->weight_bytes += r.bytes();
    return r;
  }
  WeightRef Fp4(int64_t n, int64_t k) {
    WeightRef r;
    r.format = WeightFormat::kFp4; r.n = n; r.k = k;
    r.scale_format = gpu::ScaleFormat::kUe8m0;
    void* d = m_->Alloc<uint8_t>(n * k / 2);
    Fill(d, n * k / 2, gpu::RandomKind::kFp4, 0, 0);
    void* s = m_->Alloc<uint8_t>(n * k / 32);
    // One scale for every group: the GPU layout's order does not matter, its bias does.
    const auto e = static_cast<uint8_t>(ExpFor(1.0 / (2.93 * std::sqrt(double(k)))));
    Fill(s, n * k / 32, gpu::RandomKind::kByte, static_cast<float>(gpu::Fp4GpuScaleByte(e)), 0);
    r.data = d; r.scale = s;
    m_->weight_bytes += r.bytes();
    return r;
  }
  WeightRef Bf16(int64_t n, int64_t k, float std) {
    WeightRef r;
    r.format = WeightFormat::kBf16; r.n = n; r.k = k;
    void* d = m_->Alloc<uint16_t>(n * k);
    Fill(d, n * k, gpu::RandomKind::kBf16Normal, 0, std);
    r.data = d;
    m_->weight_bytes += r.bytes();
    return r;
  }
  WeightRef F32(int64_t n, int64_t k, float mean, float std) {
    WeightRef r;
    r.format = WeightFormat::kF32; r.n = n; r.k = k;
    r.data = Vec(n * k, mean, std);
    return r;
  }
  float* Vec(int64_t n, float mean, float std) {
    float* p = m_->Alloc<float>(n);
    Fill(p, n, gpu::RandomKind::kF32Normal, mean, std);
    m_->weight_bytes += static_cast<size_t>(n) * 4;
    return p;
  }
  HcW Hc(int64_t outs) {
    const auto& c = m_->c;
    HcW h;
    h.fn = F32(outs, c.hc_mult * c.hidden_size, 0, 0.1f);
    h.base = Vec(outs, 0, 0.5f);
    h.scale = Vec(outs == c.hc_mult ? 1 : 3, 1.0f, 0.2f);
    return h;
  }
  CompressorW Comp(int rate, int dim, bool overlap) {
    const auto& c = m_->c;
    CompressorW cw;
    cw.rate = rate; cw.dim = dim; cw.overlap = overlap;
    const float std = 1.0f / std::sqrt(static_cast<float>(c.hidden_size));
    cw.kv_gate = Bf16(2 * cw.width(), c.hidden_size, std);  // wkv's rows, then wgate's
    cw.wkv = cw.kv_gate;
    cw.wkv.n = cw.width();
    cw.wgate = cw.wkv;
    cw.wgate.data = static_cast<const uint16_t*>(cw.kv_gate.data) + cw.width() * c.hidden_size;
    cw.ape = Vec(int64_t{rate} * cw.width(), 0, 0.5f);
    cw.norm = Vec(dim, 1.0f, 0.1f);
    return cw;
  }
  void Block(int layer, BlockW* b) {
    const auto& c = m_->c;
    const int64_t D = c.hidden_size, H = c.num_heads, d = c.head_dim, I = c.moe_intermediate_size;
    const int E = c.n_routed_experts;
    const size_t before = m_->weight_bytes;
    b->attn_norm = Vec(D, 1, 0.1f);
    b->ffn_norm = Vec(D, 1, 0.1f);
    b->hc_attn = Hc((2 + c.hc_mult) * c.hc_mult);
    b->hc_ffn = Hc((2 + c.hc_mult) * c.hc_mult);
    b->wq_a = Fp8(c.q_lora_rank, D);
    b->q_norm = Vec(c.q_lora_rank, 1, 0.1f);
    b->wq_b = Fp8(H * d, c.q_lora_rank);
    b->wkv = Fp8(d, D);
    b->kv_norm = Vec(d, 1, 0.1f);
    b->wo_a = Fp8(int64_t{c.o_groups} * c.o_lora_rank, H * d / c.o_groups);
    b->wo_b = Fp8(D, int64_t{c.o_groups} * c.o_lora_rank);
    b->sink = Vec(H, 0, 1);
    const int rate = c.compress_ratios[layer];
    b->rate = rate;
    if (rate != 0) {
      const bool csa = rate == c.csa_rate;
      b->has_comp = true;
      b->comp = Comp(rate, static_cast<int>(d), csa);
      if (csa) {
        b->has_idx = true;
        b->idx_wq_b = Fp8(int64_t{c.index_n_heads} * c.index_head_dim, c.q_lora_rank);
        b->idx_weights_proj = Bf16(c.index_n_heads, D, 1.0f / std::sqrt(static_cast<float>(D)));
        b->idx_comp = Comp(rate, c.index_head_dim, true);
      }
    }
    b->gate = Bf16(E, D, 1.0f / std::sqrt(static_cast<float>(D)));
    if (c.hash_layers[layer]) {
      std::vector<int32_t> t(static_cast<size_t>(c.vocab_size * c.num_experts_per_tok));
      uint64_t s = seed_ + 77 + layer;
      for (auto& v : t) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        v = static_cast<int32_t>((s >> 33) % static_cast<uint64_t>(E));
      }
      b->tid2eid = m_->Alloc<int32_t>(static_cast<int64_t>(t.size()));
      gpu::CopyToDeviceSync(b->tid2eid, t.data(), t.size() * 4);
      m_->weight_bytes += t.size() * 4;
    } else {
      b->gate_bias = Vec(E, 0, 0.1f);
    }
    const size_t before_experts = m_->weight_bytes;
    std::vector<const void*> tables[6];
    for (int e = 0; e < E; ++e) {
      WeightRef w1 = Fp4(I, D), w3 = Fp4(I, D), w2 = Fp4(D, I);
      if (e == 0) {
        b->experts.w1 = w1; b->experts.w3 = w3; b->experts.w2 = w2;
        b->experts.bytes_per_expert = w1.bytes() + w3.bytes() + w2.bytes();
      }
      tables[0].push_back(w1.data); tables[1].push_back(w1.scale);
      tables[2].push_back(w3.data); tables[3].push_back(w3.scale);
      tables[4].push_back(w2.data); tables[5].push_back(w2.scale);
    }
    m_->UploadExpertTables(tables, &b->experts);
    const size_t expert_total = m_->weight_bytes - before_experts;
    b->has_shared = c.n_shared_experts > 0;
    if (b->has_shared) {
      b->sh_w1 = Fp8(I, D);
      b->sh_w3 = Fp8(I, D);
      b->sh_w2 = Fp8(D, I);
    }
    m_->dense_bytes += m_->weight_bytes - before - expert_total;
  }

 private:
  CudaModel::Impl* m_;
  uint64_t seed_;
  uint64_t counter_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<CudaModel>> CudaModel::CreateRandom(const io::DeepseekV4Config& config,
                                                             uint64_t seed,
                                                             const CudaModelOptions& options) {
  if (!gpu::DeviceAvailable()) return Unimplemented("no CUDA device");
  DSINFER_RETURN_IF_ERROR(config.Validate());
  DSINFER_RETURN_IF_ERROR(CheckSupported(config));
  auto impl = std::make_unique<Impl>();
  impl->c = config;
  impl->opt = options;
  RandomBuilder rb(impl.get(), seed);
  const int64_t V = config.vocab_size, D = config.hidden_size;
  impl->embed = rb.Bf16(V, D, 1.0f);
  impl->head = rb.Bf16(V, D, 1.0f / std::sqrt(static_cast<float>(D)));
  impl->norm = rb.Vec(D, 1, 0.1f);
  impl->hc_head = rb.Hc(config.hc_mult);
  impl->dense_bytes = impl->weight_bytes - impl->embed.bytes();
  impl->layers.resize(config.num_layers);
  for (int l = 0; l < config.num_layers; ++l) rb.Block(l, &impl->layers[l]);
  impl->AllocateState();
  impl->AllocateActivations();
  impl->stream.Synchronize();
  return std::unique_ptr<CudaModel>(new CudaModel(std::move(impl)));
}

}  // namespace dsinfer::model::deepseek_v4::cuda
