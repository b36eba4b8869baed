// Internal to the CUDA executor's loading (cuda_model_load.cc: DeepSeek-V4 and the entry points,
// cuda_model_load_v41.cc: DeepSeek-V4.1): the checks and the two weight builders both families
// use (from a checkpoint, device-random). Not part of the public API.
#pragma once

#include <string>
#include <vector>

#include "model/deepseek_v4/cuda/cuda_model_impl.h"
#include "model/deepseek_v4/weight_schema.h"

namespace dsinfer::model::deepseek_v4::cuda {

// The shapes a config gives the kernels, checked by the kernels' own Validate() (their limits
// live with the kernels): Unimplemented naming the limit, before any weight is read.
Status CheckSupported(const io::DeepseekV4Config& c);
// The options' limits: max_tokens (rows per forward call) 1..65,535.
Status CheckOptions(const CudaModelOptions& o);

// ---- loading from a checkpoint ----

class GpuLoader {
 public:
  GpuLoader(const io::Checkpoint& ckpt, CudaModel::Impl* m) : ckpt_(ckpt), m_(m), schema_(m->c) {}
  // Another family's schema (DeepSeek-V4.1's).
  GpuLoader(const io::Checkpoint& ckpt, CudaModel::Impl* m, std::vector<TensorSpec> schema)
      : ckpt_(ckpt), m_(m), schema_(std::move(schema)) {}

  // A linear of the schema in its checkpoint format (FP8 / FP4 re-ordered for the tensor cores).
  // dest: where an unquantized matrix goes (its bytes there), instead of a buffer of its own.
  StatusOr<WeightRef> Matrix(const std::string& name, void* dest = nullptr) {
    const TensorSpec& spec = schema_.Get(name);
    const int64_t rows = spec.shape[0], cols = spec.shape[1];
    DSINFER_ASSIGN_OR_RETURN(LinearTensor t, FindLinear(ckpt_, spec, m_->c.fp8_block_size));
    const io::TensorView* w = t.weight;
    WeightRef r;
    r.n = rows;
    r.k = cols;
    r.block = m_->c.fp8_block_size;
    switch (t.storage) {
      case LinearStorage::kF32:
        r.format = WeightFormat::kF32;
        break;
      case LinearStorage::kBf16:
        r.format = WeightFormat::kBf16;
        break;
      case LinearStorage::kFp8:
        r.format = WeightFormat::kFp8;
        break;
      case LinearStorage::kFp4:
        r.format = WeightFormat::kFp4;
        break;
      case LinearStorage::kF16: {  // rare: widen to fp32
        DSINFER_ASSIGN_OR_RETURN(auto v, io::DequantizeToF32(*w, nullptr, spec.shape, r.block));
        r.format = WeightFormat::kF32;
        r.data = m_->UploadF32(v);
        Count(spec, r.bytes());
        return r;
      }
    }
    if (t.quantized() && m_->opt.fp8_mma) return MmaMatrix(spec, t, r);
    if (t.quantized()) {
      std::string why;
      if (!gpu::QLinearSupports(r, false, &why)) {
        return Unimplemented("tensor '" + name + ".weight' [" + std::to_string(rows) + ", " +
                             std::to_string(cols) +
                             "]: the CUDA FP8/FP4 linear does not take it: " + why);
      }
    }
    const int64_t device_bytes = r.format == WeightFormat::kFp8 ? gpu::Fp8TiledBytes(rows, cols)
                                                                : static_cast<int64_t>(w->nbytes);
    void* data = dest && !t.quantized() ? dest : m_->Alloc<uint8_t>(device_bytes);
    if (t.quantized()) {  // the tensor-core fragment order (TileFp8ForMma / TileFp4ForMma)
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
    if (t.quantized()) {
      const io::TensorView* sc = t.scale;
      r.scale_format = t.scale_f32 ? gpu::ScaleFormat::kF32 : gpu::ScaleFormat::kUe8m0;
      void* sd = m_->Alloc<uint8_t>(static_cast<int64_t>(sc->nbytes));
      if (r.format == WeightFormat::kFp4) {  // the kernel's order and bias (TileFp4ScalesForMma)
        std::vector<uint8_t> tiled(sc->nbytes);
        gpu::TileFp4ScalesForMma(static_cast<const uint8_t*>(sc->data), tiled.data(), rows, cols);
        gpu::CopyToDeviceSync(sd, tiled.data(), tiled.size());
      } else {
        gpu::CopyToDeviceSync(sd, sc->data, sc->nbytes);
      }
      r.scale = sd;
    }
    Count(spec, r.bytes());
    return r;
  }

  // An FP8 / FP4 matrix in the FP8-instruction mode's layout (WeightRef::mma): the checkpoint's
  // bytes as they are, the scales per row and 128-column block (io::QuantizedToMma's values).
  StatusOr<WeightRef> MmaMatrix(const TensorSpec& spec, const LinearTensor& t, WeightRef r) {
    const int64_t rows = spec.shape[0], cols = spec.shape[1];
    if (r.format == WeightFormat::kFp8 && r.block != 128) {
      return InvalidArgument("the FP8-instruction mode needs 128 x 128 FP8 blocks, not " +
                             std::to_string(r.block));
    }
    if (cols % 32 != 0) {
      return InvalidArgument("tensor '" + spec.name +
                             "': the FP8-instruction mode needs k % 32 == 0");
    }
    // FP8: QuantizedToMma checks the layouts, and its per-row scales are what the kernels
    // multiply by. FP4: the checkpoint's ue8m0 group scales as they are (checked here; its codes
    // are not expanded).
    io::MmaOperand mo;
    if (r.format == WeightFormat::kFp8) {
      DSINFER_ASSIGN_OR_RETURN(mo, io::QuantizedToMma(*t.weight, t.scale, spec.shape, r.block));
    } else if (t.scale == nullptr || t.scale->dtype != DType::kF8E8M0 ||
               t.scale->nbytes != static_cast<size_t>(rows * (cols / 32)) ||
               t.weight->nbytes != static_cast<size_t>(rows * cols / 2)) {
      return DataLoss("tensor '" + spec.name + "' or its scale does not have the FP4 layout");
    }
    r.mma = true;
    r.scale_format = gpu::ScaleFormat::kF32;
    void* data = m_->Alloc<uint8_t>(static_cast<int64_t>(t.weight->nbytes));
    gpu::CopyToDeviceSync(data, t.weight->data, t.weight->nbytes);
    std::vector<uint8_t> packed(static_cast<size_t>(gpu::MmaScaleBytes(rows, cols)));
    if (r.format == WeightFormat::kFp8) {
      gpu::PackMmaScalesFp8(mo.scale.data(), rows, cols, reinterpret_cast<float*>(packed.data()));
    } else {
      gpu::PackMmaScalesFp4(t.scale->data, rows, cols, packed.data());
    }
    void* sd = m_->Alloc<uint8_t>(static_cast<int64_t>(packed.size()));
    gpu::CopyToDeviceSync(sd, packed.data(), packed.size());
    r.data = data;
    r.scale = sd;
    Count(spec, r.bytes());
    return r;
  }

  // The embedding (BF16 or F32), the head (the embedding's matrix when tied) and the final norm,
  // either family's.
  Status EmbedHeadNorm(bool tie_word_embeddings) {
    DSINFER_ASSIGN_OR_RETURN(m_->embed, Matrix("embed"));
    if (m_->embed.format != WeightFormat::kBf16 && m_->embed.format != WeightFormat::kF32) {
      return Unimplemented("CUDA backend: the embedding must be BF16 or F32");
    }
    if (tie_word_embeddings) {
      m_->head = m_->embed;  // the head reads the embedding matrix (every step: dense bytes)
      m_->dense_bytes += m_->embed.bytes();
    } else {
      DSINFER_ASSIGN_OR_RETURN(m_->head, Matrix("head"));
    }
    DSINFER_ASSIGN_OR_RETURN(m_->norm, Vector("norm.weight"));
    return Status::Ok();
  }

  // A plain tensor of the schema, uploaded as fp32.
  StatusOr<float*> Vector(const std::string& name) {
    const TensorSpec& spec = schema_.Get(name);
    DSINFER_ASSIGN_OR_RETURN(const io::TensorView* t, ckpt_.GetChecked(name, spec.shape));
    DSINFER_ASSIGN_OR_RETURN(auto v, io::DequantizeToF32(*t, nullptr, spec.shape, 128));
    Count(spec, v.size() * 4);
    return m_->UploadF32(v);
  }

  // An fp32 matrix held as a plain vector (the mHC mixing weights).
  StatusOr<WeightRef> F32Matrix(const std::string& name) {
    DSINFER_ASSIGN_OR_RETURN(float* p, Vector(name));
    WeightRef r;
    r.format = WeightFormat::kF32;
    r.data = p;
    r.n = schema_.Get(name).shape[0];
    r.k = schema_.Get(name).shape[1];
    return r;
  }

  Status Hc(const std::string& prefix, HcW* hc) {
    DSINFER_ASSIGN_OR_RETURN(hc->fn, F32Matrix(prefix + "_fn"));
    DSINFER_ASSIGN_OR_RETURN(hc->base, Vector(prefix + "_base"));
    DSINFER_ASSIGN_OR_RETURN(hc->scale, Vector(prefix + "_scale"));
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
    DSINFER_ASSIGN_OR_RETURN(cw->wkv, Matrix(p + "wkv", both));
    DSINFER_ASSIGN_OR_RETURN(
        cw->wgate, Matrix(p + "wgate", joint ? both + width * c.hidden_size * elem : nullptr));
    if (joint) {
      cw->kv_gate = cw->wkv;
      cw->kv_gate.n = 2 * width;
    }
    DSINFER_ASSIGN_OR_RETURN(cw->ape, Vector(p + "ape"));
    DSINFER_ASSIGN_OR_RETURN(cw->norm, Vector(p + "norm.weight"));
    return Status::Ok();
  }

  // Routed experts: each matrix kind packed into one buffer (expert e at e * stride).
  // experts: their count when not the config's (DeepSeek-V4.1's DSpark stages).
  // With the model's expert filter (expert parallelism) only the experts it accepts of MoE layer
  // moe_layer (set_moe_layer) are loaded; the others' table entries stay null.
  Status Experts(const std::string& p, ExpertsW* ex, int experts = 0) {
    const auto& c = m_->c;
    const int E = experts > 0 ? experts : c.n_routed_experts;
    std::vector<const void*> tables[6];
    bool first = true;
    for (int e = 0; e < E; ++e) {
      if (m_->ep_holds && !m_->ep_holds(moe_layer_, e)) {
        for (auto& t : tables) t.push_back(nullptr);
        continue;
      }
      const std::string ep = p + "experts." + std::to_string(e) + ".";
      DSINFER_ASSIGN_OR_RETURN(WeightRef w1, Matrix(ep + "w1"));
      DSINFER_ASSIGN_OR_RETURN(WeightRef w3, Matrix(ep + "w3"));
      DSINFER_ASSIGN_OR_RETURN(WeightRef w2, Matrix(ep + "w2"));
      if (first) {
        first = false;
        ex->w1 = w1;
        ex->w3 = w3;
        ex->w2 = w2;
        ex->bytes_per_expert = w1.bytes() + w3.bytes() + w2.bytes();
      } else if (w1.format != ex->w1.format || w2.format != ex->w2.format ||
                 w3.format != ex->w3.format || w1.scale_format != ex->w1.scale_format) {
        return DataLoss("routed experts of " + p + " mix weight formats");
      }
      tables[0].push_back(w1.data);
      tables[1].push_back(w1.scale);
      tables[2].push_back(w3.data);
      tables[3].push_back(w3.scale);
      tables[4].push_back(w2.data);
      tables[5].push_back(w2.scale);
    }
    if (first) {
      return InvalidArgument(p + ": the expert filter accepts none of the layer's routed experts");
    }
    m_->UploadExpertTables(tables, ex);
    return Status::Ok();
  }
  void set_moe_layer(int layer) { moe_layer_ = layer; }

  // The MTP layer mtp.0.* (spec §2.11): NotFound when the checkpoint has none.
  Status Mtp(MtpW* w) {
    const auto& c = m_->c;
    const std::string p = "mtp.0.";
    if (c.num_mtp_layers < 1 || !ckpt_.Find(p + "e_proj.weight")) {
      return NotFound("MTP drafting: the checkpoint has no MTP layer (mtp.0.*)");
    }
    DSINFER_ASSIGN_OR_RETURN(w->e_proj, Matrix(p + "e_proj"));
    DSINFER_ASSIGN_OR_RETURN(w->h_proj, Matrix(p + "h_proj"));
    DSINFER_ASSIGN_OR_RETURN(w->enorm, Vector(p + "enorm.weight"));
    DSINFER_ASSIGN_OR_RETURN(w->hnorm, Vector(p + "hnorm.weight"));
    DSINFER_ASSIGN_OR_RETURN(w->norm, Vector(p + "norm.weight"));
    DSINFER_RETURN_IF_ERROR(Hc(p + "hc_head", &w->hc_head));
    return Block(p, c.mtp_compress_ratio, false, &w->block);
  }

  // experts: the routed experts' count when not the config's (Experts).
  Status Block(const std::string& prefix, int rate, bool hash, BlockW* b, int experts = 0) {
    const auto& c = m_->c;
    const int64_t d = c.head_dim;
    DSINFER_ASSIGN_OR_RETURN(b->attn_norm, Vector(prefix + "attn_norm.weight"));
    DSINFER_ASSIGN_OR_RETURN(b->ffn_norm, Vector(prefix + "ffn_norm.weight"));
    DSINFER_RETURN_IF_ERROR(Hc(prefix + "hc_attn", &b->hc_attn));
    DSINFER_RETURN_IF_ERROR(Hc(prefix + "hc_ffn", &b->hc_ffn));
    const std::string ap = prefix + "attn.";
    DSINFER_ASSIGN_OR_RETURN(b->wq_a, Matrix(ap + "wq_a"));
    DSINFER_ASSIGN_OR_RETURN(b->q_norm, Vector(ap + "q_norm.weight"));
    DSINFER_ASSIGN_OR_RETURN(b->wq_b, Matrix(ap + "wq_b"));
    DSINFER_ASSIGN_OR_RETURN(b->wkv, Matrix(ap + "wkv"));
    DSINFER_ASSIGN_OR_RETURN(b->kv_norm, Vector(ap + "kv_norm.weight"));
    DSINFER_ASSIGN_OR_RETURN(b->wo_a, Matrix(ap + "wo_a"));
    DSINFER_ASSIGN_OR_RETURN(b->wo_b, Matrix(ap + "wo_b"));
    DSINFER_ASSIGN_OR_RETURN(b->sink, Vector(ap + "attn_sink"));
    b->rate = rate;
    if (rate != 0) {
      const bool csa = rate == c.csa_rate;
      b->has_comp = true;
      DSINFER_RETURN_IF_ERROR(
          Compressor(ap + "compressor.", rate, static_cast<int>(d), csa, &b->comp));
      if (csa) {
        b->has_idx = true;
        DSINFER_ASSIGN_OR_RETURN(b->idx_wq_b, Matrix(ap + "indexer.wq_b"));
        DSINFER_ASSIGN_OR_RETURN(b->idx_weights_proj, Matrix(ap + "indexer.weights_proj"));
        DSINFER_RETURN_IF_ERROR(
            Compressor(ap + "indexer.compressor.", rate, c.index_head_dim, true, &b->idx_comp));
      }
    }
    const std::string fp = prefix + "ffn.";
    DSINFER_ASSIGN_OR_RETURN(b->gate, Matrix(fp + "gate"));
    if (hash) {
      const TensorSpec& spec = schema_.Get(fp + "gate.tid2eid");
      DSINFER_ASSIGN_OR_RETURN(std::vector<int32_t> v,
                               ReadTid2eid(ckpt_, spec, c.n_routed_experts));
      b->tid2eid = m_->Alloc<int32_t>(static_cast<int64_t>(v.size()));
      gpu::CopyToDeviceSync(b->tid2eid, v.data(), v.size() * 4);
      Count(spec, v.size() * 4);
    } else {
      DSINFER_ASSIGN_OR_RETURN(b->gate_bias, Vector(fp + "gate.bias"));
    }
    DSINFER_RETURN_IF_ERROR(Experts(fp, &b->experts, experts));
    if (c.n_shared_experts > 0) {
      b->has_shared = true;
      DSINFER_ASSIGN_OR_RETURN(b->sh_w1, Matrix(fp + "shared_experts.w1"));
      DSINFER_ASSIGN_OR_RETURN(b->sh_w3, Matrix(fp + "shared_experts.w3"));
      DSINFER_ASSIGN_OR_RETURN(b->sh_w2, Matrix(fp + "shared_experts.w2"));
    }
    return Status::Ok();
  }

 private:
  int moe_layer_ = 0;  // the layer Experts loads (the expert filter's argument)
  // The byte accounting by the schema's roles: every weight, and the dense ones (read once per
  // step: all but the routed experts and the embedding, of which a step reads a few rows).
  void Count(const TensorSpec& spec, size_t bytes) {
    m_->weight_bytes += bytes;
    if (!spec.routed_expert() && spec.name != "embed") m_->dense_bytes += bytes;
    if (m_->opt.on_load_progress) {
      m_->opt.on_load_progress(static_cast<int64_t>(m_->weight_bytes), total_bytes_);
    }
  }

  const io::Checkpoint& ckpt_;
  const int64_t total_bytes_ = [this] {
    int64_t total = 0;
    for (const auto& [name, view] : ckpt_.tensors()) total += static_cast<int64_t>(view->nbytes);
    return total;
  }();
  CudaModel::Impl* m_;
  const WeightSchemaIndex schema_;
};

// Device-random weights in the official formats.
class RandomBuilder {
 public:
  RandomBuilder(CudaModel::Impl* m, uint64_t seed) : m_(m), seed_(seed), schema_(m->c) {}
  // Another family's schema (DeepSeek-V4.1's).
  RandomBuilder(CudaModel::Impl* m, uint64_t seed, std::vector<TensorSpec> schema)
      : m_(m), seed_(seed), schema_(std::move(schema)) {}

  void Fill(void* p, int64_t count, gpu::RandomKind kind, float mean, float std) {
    gpu::RandomFillParams f;
    f.data = p;
    f.count = count;
    f.kind = kind;
    f.seed = seed_ * 1000003ull + counter_++;
    f.mean = mean;
    f.std = std;
    gpu::LaunchRandomFill(f, m_->stream.get());
  }
  static int ExpFor(double target) {
    return 127 + static_cast<int>(std::lround(std::log2(target)));
  }

  WeightRef Fp8(int64_t n, int64_t k) {
    if (m_->opt.fp8_mma) return MmaRandom(n, k, false);
    WeightRef r;
    r.format = WeightFormat::kFp8;
    r.n = n;
    r.k = k;
    r.block = 128;
    r.scale_format = gpu::ScaleFormat::kUe8m0;
    const int64_t bytes = gpu::Fp8TiledBytes(n, k);  // random bytes: no layout to apply
    void* d = m_->Alloc<uint8_t>(bytes);
    Fill(d, bytes, gpu::RandomKind::kFp8, 0, 64.0f);
    const int64_t sn = ((n + 127) / 128) * ((k + 127) / 128);
    void* s = m_->Alloc<uint8_t>(sn);
    Fill(s, sn, gpu::RandomKind::kByte,
         static_cast<float>(ExpFor(1.0 / (64.0 * std::sqrt(double(k))))), 0);
    r.data = d;
    r.scale = s;
    return r;
  }
  WeightRef Fp4(int64_t n, int64_t k) {
    if (m_->opt.fp8_mma) return MmaRandom(n, k, true);
    WeightRef r;
    r.format = WeightFormat::kFp4;
    r.n = n;
    r.k = k;
    r.scale_format = gpu::ScaleFormat::kUe8m0;
    void* d = m_->Alloc<uint8_t>(n * k / 2);
    Fill(d, n * k / 2, gpu::RandomKind::kFp4, 0, 0);
    void* s = m_->Alloc<uint8_t>(n * k / 32);
    // One scale for every group: the GPU layout's order does not matter, its bias does.
    const auto e = static_cast<uint8_t>(ExpFor(1.0 / (2.93 * std::sqrt(double(k)))));
    Fill(s, n * k / 32, gpu::RandomKind::kByte, static_cast<float>(gpu::Fp4GpuScaleByte(e)), 0);
    r.data = d;
    r.scale = s;
    return r;
  }
  // Fp8 / Fp4's weights in the FP8-instruction mode's layout (WeightRef::mma): the same
  // distributions, every scale the same power of two.
  WeightRef MmaRandom(int64_t n, int64_t k, bool fp4) {
    WeightRef r;
    r.format = fp4 ? WeightFormat::kFp4 : WeightFormat::kFp8;
    r.n = n;
    r.k = k;
    r.block = 128;
    r.mma = true;
    r.scale_format = gpu::ScaleFormat::kF32;
    const int64_t bytes = fp4 ? n * k / 2 : n * k, sbytes = gpu::MmaScaleBytes(n, k);
    void* d = m_->Alloc<uint8_t>(bytes);
    Fill(d, bytes, fp4 ? gpu::RandomKind::kFp4 : gpu::RandomKind::kFp8, 0, fp4 ? 0.0f : 64.0f);
    void* s = m_->Alloc<uint8_t>(sbytes);
    if (fp4) {
      Fill(s, sbytes, gpu::RandomKind::kByte,
           static_cast<float>(ExpFor(1.0 / (2.93 * std::sqrt(double(k))))), 0);
    } else {
      const std::vector<float> v(
          static_cast<size_t>(sbytes / 4),
          std::ldexp(1.0f, ExpFor(1.0 / (64.0 * std::sqrt(double(k)))) - 127));
      gpu::CopyToDeviceSync(s, v.data(), static_cast<size_t>(sbytes));
    }
    r.data = d;
    r.scale = s;
    return r;
  }
  WeightRef Bf16(int64_t n, int64_t k, float std) {
    WeightRef r;
    r.format = WeightFormat::kBf16;
    r.n = n;
    r.k = k;
    void* d = m_->Alloc<uint16_t>(n * k);
    Fill(d, n * k, gpu::RandomKind::kBf16Normal, 0, std);
    r.data = d;
    return r;
  }
  // A linear of the schema in the release format of its class (FP8 dense, FP4 routed experts,
  // BF16 plain).
  WeightRef Linear(const std::string& name) {
    const TensorSpec& t = schema_.Get(name);
    const int64_t n = t.shape[0], k = t.shape[1];
    WeightRef r = t.linear == LinearClass::kQuantized ? Fp8(n, k)
                  : t.linear == LinearClass::kExpert  ? Fp4(n, k)
                                                      : Bf16(n, k, t.std);
    Count(t, r.bytes());
    return r;
  }
  // The embedding, the head (the embedding's matrix when tied) and the final norm.
  void EmbedHeadNorm(bool tie_word_embeddings) {
    m_->embed = Linear("embed");
    if (tie_word_embeddings) {
      m_->head = m_->embed;
      m_->dense_bytes += m_->embed.bytes();
    } else {
      m_->head = Linear("head");
    }
    m_->norm = Vec("norm.weight");
  }
  // A plain tensor of the schema as fp32.
  float* Vec(const std::string& name) {
    const TensorSpec& t = schema_.Get(name);
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    float* p = m_->Alloc<float>(n);
    Fill(p, n, gpu::RandomKind::kF32Normal, t.mean, t.std);
    Count(t, static_cast<size_t>(n) * 4);
    return p;
  }
  WeightRef F32(const std::string& name) {
    const TensorSpec& t = schema_.Get(name);
    WeightRef r;
    r.format = WeightFormat::kF32;
    r.n = t.shape[0];
    r.k = t.shape[1];
    r.data = Vec(name);
    return r;
  }
  HcW Hc(const std::string& p) {
    HcW h;
    h.fn = F32(p + "_fn");
    h.base = Vec(p + "_base");
    h.scale = Vec(p + "_scale");
    return h;
  }
  void Mtp(MtpW* w) {
    const std::string p = "mtp.0.";
    w->e_proj = Linear(p + "e_proj");
    w->h_proj = Linear(p + "h_proj");
    w->enorm = Vec(p + "enorm.weight");
    w->hnorm = Vec(p + "hnorm.weight");
    w->norm = Vec(p + "norm.weight");
    w->hc_head = HcHead(p);
    Block(m_->c.num_layers, &w->block);
  }
  HcW HcHead(const std::string& p) {
    HcW h;
    h.fn = F32(p + "hc_head_fn");
    h.base = Vec(p + "hc_head_base");
    h.scale = Vec(p + "hc_head_scale");
    return h;
  }
  CompressorW Comp(const std::string& p, int rate, int dim, bool overlap) {
    const auto& c = m_->c;
    CompressorW cw;
    cw.rate = rate;
    cw.dim = dim;
    cw.overlap = overlap;
    const TensorSpec& kv = schema_.Get(p + "wkv");
    cw.kv_gate = Bf16(2 * cw.width(), c.hidden_size, kv.std);  // wkv's rows, then wgate's
    Count(kv, cw.kv_gate.bytes());
    cw.wkv = cw.kv_gate;
    cw.wkv.n = cw.width();
    cw.wgate = cw.wkv;
    cw.wgate.data = static_cast<const uint16_t*>(cw.kv_gate.data) + cw.width() * c.hidden_size;
    cw.ape = Vec(p + "ape");
    cw.norm = Vec(p + "norm.weight");
    return cw;
  }
  // Layer `layer` (num_layers: the MTP layer's block, under the prefix "mtp.0."). With a prefix:
  // a window-only block under it (DeepSeek-V4.1's DSpark stages, layer num_layers) of `experts`
  // routed experts.
  void Block(int layer, BlockW* b, const std::string& prefix = "", int experts = 0) {
    const auto& c = m_->c;
    const int64_t d = c.head_dim;
    const int E = experts > 0 ? experts : c.n_routed_experts;
    const bool mtp = layer >= c.num_layers;
    const std::string p = !prefix.empty() ? prefix
                          : mtp           ? "mtp.0."
                                          : "layers." + std::to_string(layer) + ".";
    const std::string a = p + "attn.", f = p + "ffn.";
    b->attn_norm = Vec(p + "attn_norm.weight");
    b->ffn_norm = Vec(p + "ffn_norm.weight");
    b->hc_attn = Hc(p + "hc_attn");
    b->hc_ffn = Hc(p + "hc_ffn");
    b->wq_a = Linear(a + "wq_a");
    b->q_norm = Vec(a + "q_norm.weight");
    b->wq_b = Linear(a + "wq_b");
    b->wkv = Linear(a + "wkv");
    b->kv_norm = Vec(a + "kv_norm.weight");
    b->wo_a = Linear(a + "wo_a");
    b->wo_b = Linear(a + "wo_b");
    b->sink = Vec(a + "attn_sink");
    const int rate = !prefix.empty() ? 0 : mtp ? c.mtp_compress_ratio : c.compress_ratios[layer];
    b->rate = rate;
    if (rate != 0) {
      const bool csa = rate == c.csa_rate;
      b->has_comp = true;
      b->comp = Comp(a + "compressor.", rate, static_cast<int>(d), csa);
      if (csa) {
        b->has_idx = true;
        b->idx_wq_b = Linear(a + "indexer.wq_b");
        b->idx_weights_proj = Linear(a + "indexer.weights_proj");
        b->idx_comp = Comp(a + "indexer.compressor.", rate, c.index_head_dim, true);
      }
    }
    b->gate = Linear(f + "gate");
    if (!mtp && c.hash_layers[layer]) {
      const TensorSpec& spec = schema_.Get(f + "gate.tid2eid");
      std::vector<int32_t> t(static_cast<size_t>(spec.shape[0] * spec.shape[1]));
      uint64_t s = seed_ + 77 + layer;
      for (auto& v : t) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        v = static_cast<int32_t>((s >> 33) % static_cast<uint64_t>(E));
      }
      b->tid2eid = m_->Alloc<int32_t>(static_cast<int64_t>(t.size()));
      gpu::CopyToDeviceSync(b->tid2eid, t.data(), t.size() * 4);
      Count(spec, t.size() * 4);
    } else {
      b->gate_bias = Vec(f + "gate.bias");
    }
    std::vector<const void*> tables[6];
    for (int e = 0; e < E; ++e) {
      const std::string ep = f + "experts." + std::to_string(e) + ".";
      WeightRef w1 = Linear(ep + "w1"), w3 = Linear(ep + "w3"), w2 = Linear(ep + "w2");
      if (e == 0) {
        b->experts.w1 = w1;
        b->experts.w3 = w3;
        b->experts.w2 = w2;
        b->experts.bytes_per_expert = w1.bytes() + w3.bytes() + w2.bytes();
      }
      tables[0].push_back(w1.data);
      tables[1].push_back(w1.scale);
      tables[2].push_back(w3.data);
      tables[3].push_back(w3.scale);
      tables[4].push_back(w2.data);
      tables[5].push_back(w2.scale);
    }
    m_->UploadExpertTables(tables, &b->experts);
    b->has_shared = c.n_shared_experts > 0;
    if (b->has_shared) {
      b->sh_w1 = Linear(f + "shared_experts.w1");
      b->sh_w3 = Linear(f + "shared_experts.w3");
      b->sh_w2 = Linear(f + "shared_experts.w2");
    }
  }

 private:
  // The byte accounting by the schema's roles, as GpuLoader::Count.
  void Count(const TensorSpec& spec, size_t bytes) {
    m_->weight_bytes += bytes;
    if (!spec.routed_expert() && spec.name != "embed") m_->dense_bytes += bytes;
  }

  CudaModel::Impl* m_;
  uint64_t seed_;
  uint64_t counter_ = 0;
  const WeightSchemaIndex schema_;
};

// DeepSeek-V4.1 (cuda_model_load_v41.cc): its config and checkpoint from model_dir into impl (a
// new Impl), its shapes checked first.
Status LoadV41(const std::string& model_dir, const CudaModelOptions& options,
               CudaModel::Impl* impl);

}  // namespace dsinfer::model::deepseek_v4::cuda
