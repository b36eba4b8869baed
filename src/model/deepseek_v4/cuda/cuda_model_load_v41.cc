// Loading DeepSeek-V4.1 on the CUDA model: from a checkpoint (LoadV41, which CudaModel::Load
// calls for a V4.1 directory) or device-random weights (CreateRandomV41): each layer's shared
// parts through V4's loaders (cuda_model_load.h), then V4.1's own (compressors and KV groups, the
// indexer, Engram).
#include "model/deepseek_v4/cuda/cuda_model_load.h"
#include "model/deepseek_v41/engram.h"
#include "model/deepseek_v41/model.h"
#include "model/deepseek_v41/weight_schema.h"

namespace dsinfer::model::deepseek_v4::cuda {

namespace {

// The V4 fields of a V4.1 config that the shared parts read (mHC, MoE, the latent attention's
// projections, the head): no V4 compressor, indexer, hash layer or MTP layer.
io::DeepseekV4Config V41View(const io::DeepseekV41Config& c) {
  io::DeepseekV4Config m = deepseek_v41::MixingConfig(c);
  m.num_layers = c.num_layers;
  m.num_heads = c.num_heads;
  m.head_dim = c.head_dim;
  m.rope_head_dim = c.rope_head_dim;
  m.q_lora_rank = c.q_lora_rank;
  m.o_groups = c.o_groups;
  m.o_lora_rank = c.o_lora_rank;
  m.n_shared_experts = c.n_shared_experts;
  m.sliding_window = c.sliding_window;
  m.rope_theta = c.rope_theta;
  m.compress_rope_theta = c.compress_rope_theta;
  m.compress_yarn = c.compress_yarn;
  m.max_position_embeddings = c.max_position_embeddings;
  m.index_n_heads = c.index_n_heads;
  m.index_head_dim = c.index_head_dim;
  m.index_topk = c.index_topk;
  m.num_mtp_layers = 0;
  m.compress_ratios.assign(static_cast<size_t>(c.num_layers), 0);
  m.hash_layers.assign(static_cast<size_t>(c.num_layers), false);
  m.bos_token_id = c.bos_token_id;
  m.eos_token_id = c.eos_token_id;
  m.fp8_block_size = c.fp8_block_size;
  m.tie_word_embeddings = c.tie_word_embeddings;
  return m;
}

Status CheckSupportedV41(const io::DeepseekV41Config& c) {
  DSINFER_RETURN_IF_ERROR(CheckSupported(V41View(c)));
  for (int l = 0; l < c.num_layers; ++l) {
    const int r = c.compress_ratios[l];
    if (r == 0) continue;
    gpu::CompressEmitParams cp;
    cp.rate = r;
    DSINFER_RETURN_IF_ERROR(cp.Validate());
    if (c.IsIndexSource(l)) {
      gpu::IndexerTopKParams ip;
      ip.heads = c.index_n_heads;
      ip.head_dim = c.index_head_dim;
      ip.rope_dim = c.rope_head_dim;
      ip.query_fp4_block = 32;
      DSINFER_RETURN_IF_ERROR(ip.Validate());
    }
  }
  return Status::Ok();
}

// The V4.1 extras of layer l (the V4 block's shared parts are loaded by GpuLoader::Block).
Status LoadV41Layer(GpuLoader& ld, const io::Checkpoint& ckpt, CudaModel::Impl* m, int l) {
  const io::DeepseekV41Config& c = m->v41->c;
  V41LayerW& x = m->v41->layers[l];
  const std::string p = "layers." + std::to_string(l) + ".", a = p + "attn.";
  x = V41LayerW::ModeOf(c, l);
  if (x.kv_source) {
    const std::string cp = a + "compressor.";
    if (x.ratio > 1) {  // both bf16 (or both fp32): one matrix, wgate's rows after wkv's
      const io::TensorView* kv = ckpt.Find(cp + "wkv.weight");
      const io::TensorView* gate = ckpt.Find(cp + "wgate.weight");
      const bool joint = kv && gate && kv->dtype == gate->dtype &&
                         (kv->dtype == DType::kBF16 || kv->dtype == DType::kF32);
      const int64_t elem = joint && kv->dtype == DType::kF32 ? 4 : 2;
      const int64_t half = int64_t{c.head_dim} * c.hidden_size * elem;
      uint8_t* both = joint ? m->Alloc<uint8_t>(2 * half) : nullptr;
      DSINFER_ASSIGN_OR_RETURN(x.comp_wkv, ld.Matrix(cp + "wkv", both));
      DSINFER_ASSIGN_OR_RETURN(x.comp_wgate,
                               ld.Matrix(cp + "wgate", joint ? both + half : nullptr));
      if (joint) {
        x.comp_kv_gate = x.comp_wkv;
        x.comp_kv_gate.n = 2 * c.head_dim;
      }
    } else {
      DSINFER_ASSIGN_OR_RETURN(x.comp_wkv, ld.Matrix(cp + "wkv"));
    }
    DSINFER_ASSIGN_OR_RETURN(x.comp_norm, ld.Vector(cp + "norm.weight"));
  }
  if (x.index_source) {
    DSINFER_ASSIGN_OR_RETURN(x.idx_wq_b, ld.Matrix(a + "indexer.wq_b"));
    DSINFER_ASSIGN_OR_RETURN(x.idx_weights_proj, ld.Matrix(a + "indexer.weights_proj"));
    if (x.kv_source) {
      DSINFER_ASSIGN_OR_RETURN(x.idx_wk, ld.Matrix(a + "indexer.wk"));
      DSINFER_ASSIGN_OR_RETURN(x.idx_k_norm, ld.Vector(a + "indexer.k_norm.weight"));
    }
  }
  if (x.engram >= 0) {
    // The table in its checkpoint format (rows gathered per lookup), e4m3 scales as fp32.
    const std::string g = p + "engram.";
    const int64_t rows = c.engram_num_embeddings[static_cast<size_t>(x.engram)];
    const int64_t hd = c.engram_head_dim;
    DSINFER_ASSIGN_OR_RETURN(deepseek_v41::EngramTable table,
                             deepseek_v41::EngramTable::Open(ckpt, g + "embed.", rows, hd));
    const io::TensorView* w = &table.weight();  // its shape and dtype checked by Open
    void* dev = nullptr;
    if (m->opt.engram_host_tables) {  // pinned host memory, which the device reads directly
      gpu::PinnedBuffer host = gpu::PinnedBuffer::TryAllocate(w->nbytes);
      if (host.get() == nullptr) {
        return ResourceExhausted("--engram-host-tables: " + std::to_string(w->nbytes >> 20) +
                                 " MiB of pinned host memory for " + g + "embed cannot be had");
      }
      std::memcpy(host.get(), w->data, w->nbytes);
      dev = host.get();
      m->host_owned.push_back(std::move(host));
    } else {
      dev = m->Alloc<uint8_t>(static_cast<int64_t>(w->nbytes));
      gpu::CopyToDeviceSync(dev, w->data, w->nbytes);
      m->weight_bytes += w->nbytes;
    }
    x.engram_table = dev;
    x.engram_format = w->dtype == DType::kF32 ? 0 : w->dtype == DType::kBF16 ? 1 : 2;
    if (x.engram_format == 2) x.engram_scale = m->UploadF32(table.ScalesF32());  // F32/E8M0/BF16
    DSINFER_ASSIGN_OR_RETURN(x.engram_wkv, ld.Matrix(g + "wkv"));
    const int64_t hcD = int64_t{c.hc_mult} * c.hidden_size;
    DSINFER_ASSIGN_OR_RETURN(const io::TensorView* qv,
                             ckpt.GetChecked(g + "q_weight", {c.hc_mult, c.hidden_size}));
    DSINFER_ASSIGN_OR_RETURN(const io::TensorView* kv,
                             ckpt.GetChecked(g + "k_weight", {c.hc_mult, c.hidden_size}));
    DSINFER_ASSIGN_OR_RETURN(auto q, io::DequantizeToF32(*qv, nullptr, qv->shape, 128));
    DSINFER_ASSIGN_OR_RETURN(auto k, io::DequantizeToF32(*kv, nullptr, kv->shape, 128));
    for (int64_t i = 0; i < hcD; ++i) q[i] *= k[i];  // only their product is used
    x.engram_qk = m->UploadF32(q);
  }
  return Status::Ok();
}

// The Engram hash constants on the device.
void UploadEngramHasher(const deepseek_v41::EngramHasher& h, CudaModel::Impl* m) {
  V41Parts& v = *m->v41;
  v.token_map = m->Alloc<int32_t>(static_cast<int64_t>(h.token_map.size()));
  gpu::CopyToDeviceSync(v.token_map, h.token_map.data(), h.token_map.size() * 4);
  auto flat = [&](const std::vector<std::vector<int64_t>>& rows) {
    std::vector<int64_t> all;
    for (const auto& r : rows) all.insert(all.end(), r.begin(), r.end());
    int64_t* d = m->Alloc<int64_t>(static_cast<int64_t>(all.size()));
    gpu::CopyToDeviceSync(d, all.data(), all.size() * 8);
    return d;
  };
  v.multipliers = flat(h.multipliers);
  v.primes = flat(h.primes);
  v.offsets = flat(h.offsets);
}

// DeepSeek-V4.1's own parts of layer l, device-random in the release formats (BF16 compressors
// and key projections, FP8 indexer queries, an FP8 Engram table with fp32 scales per 32).
void RandomV41Layer(RandomBuilder& rb, CudaModel::Impl* m, int l) {
  const io::DeepseekV41Config& c = m->v41->c;
  V41LayerW& x = m->v41->layers[l];
  const std::string p = "layers." + std::to_string(l) + ".", a = p + "attn.";
  x = V41LayerW::ModeOf(c, l);
  if (x.kv_source) {
    x.comp_wkv = rb.Linear(a + "compressor.wkv");
    if (x.ratio > 1) x.comp_wgate = rb.Linear(a + "compressor.wgate");
    x.comp_norm = rb.Vec(a + "compressor.norm.weight");
  }
  if (x.index_source) {
    x.idx_wq_b = rb.Linear(a + "indexer.wq_b");
    x.idx_weights_proj = rb.Linear(a + "indexer.weights_proj");
    if (x.kv_source) {
      x.idx_wk = rb.Linear(a + "indexer.wk");
      x.idx_k_norm = rb.Vec(a + "indexer.k_norm.weight");
    }
  }
  if (x.engram >= 0) {
    const std::string g = p + "engram.";
    const int64_t rows = c.engram_num_embeddings[static_cast<size_t>(x.engram)];
    const int64_t hd = c.engram_head_dim;
    void* table = nullptr;
    if (m->opt.engram_host_tables) {  // filled by the device through its mapping
      m->host_owned.emplace_back(static_cast<size_t>(rows * hd));
      table = m->host_owned.back().get();
    } else {
      table = m->Alloc<uint8_t>(rows * hd);
    }
    rb.Fill(table, rows * hd, gpu::RandomKind::kFp8, 0, 64.0f);
    float* scale = m->Alloc<float>(rows * hd / 32);
    rb.Fill(scale, rows * hd / 32, gpu::RandomKind::kF32Normal, 1.0f / 64.0f, 0.0f);
    m->weight_bytes +=
        static_cast<size_t>((m->opt.engram_host_tables ? 0 : rows * hd) + rows * hd / 32 * 4);
    x.engram_table = table;
    x.engram_format = 2;
    x.engram_scale = scale;
    x.engram_wkv = rb.Linear(g + "wkv");
    x.engram_qk = rb.Vec(g + "q_weight");  // stands for q_weight * k_weight
  }
}

// What the device ops of the DSpark drafter take (dspark.cuh), checked before loading.
Status CheckSupportedDSpark(const io::DeepseekV41Config& c, const CudaModelOptions& o) {
  DSINFER_RETURN_IF_ERROR(c.ValidateDSpark());
  gpu::DSparkAttentionParams ap;
  ap.block_size = c.dspark_block_size;
  ap.heads = c.num_heads;
  ap.dim = c.head_dim;
  ap.rope_dim = c.rope_head_dim;
  ap.ctx_stride = c.sliding_window;
  ap.q_rope = true;
  DSINFER_RETURN_IF_ERROR(ap.Validate());
  gpu::MarkovStepParams mp;
  mp.vocab = c.vocab_size;
  mp.hidden = c.hidden_size;
  mp.rank = c.dspark_markov_rank;
  DSINFER_RETURN_IF_ERROR(mp.Validate());
  if (c.dspark_block_size > o.max_tokens) {
    return InvalidArgument("DSpark on the GPU: max_tokens " + std::to_string(o.max_tokens) +
                           " holds fewer rows than a block (dspark_block_size " +
                           std::to_string(c.dspark_block_size) + ")");
  }
  return Status::Ok();
}

// A stage's MoE sizes: the dspark_* counts (norm_topk_prob only with more than one expert, as
// the CPU's draft mixing).
void SetDraftMoe(const io::DeepseekV41Config& c, BlockW* b) {
  b->moe_experts = c.dspark_n_routed_experts;
  b->moe_topk = c.dspark_num_experts_per_tok;
  b->moe_norm_topk = c.norm_topk_prob && c.dspark_num_experts_per_tok > 1 ? 1 : 0;
}

// The DSpark drafter's weights (mtp.*, DSparkWeightSchema) onto the device.
Status LoadDSpark(const io::Checkpoint& ckpt, CudaModel::Impl* m) {
  const io::DeepseekV41Config& c = m->v41->c;
  auto ds = std::make_unique<DSparkParts>();
  GpuLoader ld(ckpt, m, deepseek_v41::DSparkWeightSchema(c));
  DSINFER_ASSIGN_OR_RETURN(ds->main_proj, ld.Matrix("mtp.0.main_proj"));
  DSINFER_ASSIGN_OR_RETURN(ds->main_norm, ld.Vector("mtp.0.main_norm.weight"));
  const int S = c.num_nextn_predict_layers;
  ds->stages.resize(static_cast<size_t>(S));
  for (int s = 0; s < S; ++s) {
    BlockW& b = ds->stages[static_cast<size_t>(s)];
    DSINFER_RETURN_IF_ERROR(
        ld.Block("mtp." + std::to_string(s) + ".", 0, false, &b, c.dspark_n_routed_experts));
    SetDraftMoe(c, &b);
  }
  const std::string last = "mtp." + std::to_string(S - 1) + ".";
  DSINFER_ASSIGN_OR_RETURN(ds->norm, ld.Vector(last + "norm.weight"));
  const int64_t D = c.hidden_size, r = c.dspark_markov_rank;
  if (r > 0) {
    DSINFER_ASSIGN_OR_RETURN(ds->markov_embed, ld.Matrix(last + "markov_head.embed"));
    DSINFER_ASSIGN_OR_RETURN(ds->markov_head, ld.Matrix(last + "markov_head.head"));
    const WeightFormat e = ds->markov_embed.format, h = ds->markov_head.format;
    if (e != h || (e != WeightFormat::kBf16 && e != WeightFormat::kF32)) {
      return Unimplemented("DSpark on the GPU: " + last +
                           "markov_head.embed and .head must both be BF16 or both F32");
    }
  }
  DSINFER_ASSIGN_OR_RETURN(const io::TensorView* proj,
                           ckpt.GetChecked(last + "confidence_head.proj.weight", {1, D + r}));
  DSINFER_ASSIGN_OR_RETURN(auto conf, io::DequantizeToF32(*proj, nullptr, proj->shape, 128));
  ds->confidence = m->UploadF32(conf);
  m->weight_bytes += conf.size() * 4;
  ds->rings.resize(static_cast<size_t>(S));
  m->v41->ds = std::move(ds);
  return Status::Ok();
}

// The DSpark drafter with device-random weights in the release formats.
void RandomDSpark(CudaModel::Impl* m, uint64_t seed) {
  const io::DeepseekV41Config& c = m->v41->c;
  auto ds = std::make_unique<DSparkParts>();
  RandomBuilder rb(m, seed * 31 + 7, deepseek_v41::DSparkWeightSchema(c));
  ds->main_proj = rb.Linear("mtp.0.main_proj");
  ds->main_norm = rb.Vec("mtp.0.main_norm.weight");
  const int S = c.num_nextn_predict_layers;
  ds->stages.resize(static_cast<size_t>(S));
  for (int s = 0; s < S; ++s) {
    BlockW& b = ds->stages[static_cast<size_t>(s)];
    rb.Block(c.num_layers, &b, "mtp." + std::to_string(s) + ".", c.dspark_n_routed_experts);
    SetDraftMoe(c, &b);
  }
  const std::string last = "mtp." + std::to_string(S - 1) + ".";
  ds->norm = rb.Vec(last + "norm.weight");
  if (c.dspark_markov_rank > 0) {
    ds->markov_embed = rb.Linear(last + "markov_head.embed");
    ds->markov_head = rb.Linear(last + "markov_head.head");
  }
  ds->confidence = rb.Vec(last + "confidence_head.proj");
  ds->rings.resize(static_cast<size_t>(S));
  m->v41->ds = std::move(ds);
}

}  // namespace

Status LoadV41(const std::string& model_dir, const CudaModelOptions& options,
               CudaModel::Impl* impl) {
  auto v = std::make_unique<V41Parts>();
  DSINFER_ASSIGN_OR_RETURN(v->c, io::LoadDeepseekV41Config(model_dir));
  const io::DeepseekV41Config& c = v->c;
  DSINFER_RETURN_IF_ERROR(CheckSupportedV41(c));
  DSINFER_RETURN_IF_ERROR(io::CheckV41KvCacheDtype(options.kv_cache_dtype));
  if (options.fp8_mma) {
    return Unimplemented("the FP8-instruction mode (fp8_mma) is DeepSeek-V4 only for now");
  }
  if (options.mtp) {
    return InvalidArgument(
        "MTP speculative decoding: DeepSeek-V4.1 has no MTP layer; its drafter is DSpark "
        "(--speculative-method dspark)");
  }
  if (options.dspark) DSINFER_RETURN_IF_ERROR(CheckSupportedDSpark(c, options));
  std::unique_ptr<deepseek_v41::EngramHasher> hasher;
  if (!c.engram_layer_ids.empty()) {
    DSINFER_ASSIGN_OR_RETURN(auto token_map, deepseek_v41::LoadEngramTokenMap(model_dir, c));
    DSINFER_ASSIGN_OR_RETURN(auto h, deepseek_v41::EngramHasher::Build(c, std::move(token_map)));
    hasher = std::make_unique<deepseek_v41::EngramHasher>(std::move(h));
  }
  impl->c = V41View(c);
  impl->opt = options;
  v->layers.resize(static_cast<size_t>(c.num_layers));
  impl->v41 = std::move(v);
  DSINFER_ASSIGN_OR_RETURN(auto ckpt, io::Checkpoint::Open(model_dir));
  int64_t bytes = 0;
  for (const auto& [name, view] : ckpt->tensors()) {
    const bool host_table =
        options.engram_host_tables && name.find(".engram.embed.weight") != std::string::npos;
    const bool draft = options.dspark && name.rfind("mtp.", 0) == 0;
    if ((!deepseek_v41::IsSkippedTensor(name) || draft) && !host_table) {
      bytes += static_cast<int64_t>(view->nbytes);
    }
  }
  const int64_t free = static_cast<int64_t>(gpu::DeviceFreeBytes());
  if (bytes > free) {
    return ResourceExhausted("the model's weights (" + std::to_string(bytes >> 20) +
                             " MiB) do not fit the GPU's free " + std::to_string(free >> 20) +
                             " MiB");
  }
  CudaModel::Impl* m = impl;
  GpuLoader ld(*ckpt, m, deepseek_v41::WeightSchema(c));
  DSINFER_RETURN_IF_ERROR(ld.EmbedHeadNorm(c.tie_word_embeddings));
  m->layers.resize(static_cast<size_t>(c.num_layers));
  for (int l = 0; l < c.num_layers; ++l) {
    // The shared parts as a window-only V4 block routed by bias, then V4.1's own.
    DSINFER_RETURN_IF_ERROR(ld.Block("layers." + std::to_string(l) + ".", 0, false, &m->layers[l]));
    DSINFER_RETURN_IF_ERROR(LoadV41Layer(ld, *ckpt, m, l));
  }
  if (hasher) UploadEngramHasher(*hasher, m);
  if (options.dspark) DSINFER_RETURN_IF_ERROR(LoadDSpark(*ckpt, m));
  if (!options.paged) m->AllocateState();
  m->AllocateActivations();
  m->AllocateV41();
  if (options.dspark) m->AllocateDSpark();
  return Status::Ok();
}

StatusOr<std::unique_ptr<CudaModel>> CudaModel::CreateRandomV41(const io::DeepseekV41Config& config,
                                                                uint64_t seed,
                                                                const CudaModelOptions& options) {
  if (!gpu::DeviceAvailable()) return Unimplemented("no CUDA device");
  DSINFER_RETURN_IF_ERROR(CheckOptions(options));
  DSINFER_RETURN_IF_ERROR(config.Validate());
  DSINFER_RETURN_IF_ERROR(CheckSupportedV41(config));
  DSINFER_RETURN_IF_ERROR(io::CheckV41KvCacheDtype(options.kv_cache_dtype));
  if (options.fp8_mma) {
    return Unimplemented("the FP8-instruction mode (fp8_mma) is DeepSeek-V4 only for now");
  }
  if (options.mtp) {
    return InvalidArgument(
        "MTP speculative decoding: DeepSeek-V4.1 has no MTP layer; its drafter is DSpark "
        "(--speculative-method dspark)");
  }
  if (options.dspark) DSINFER_RETURN_IF_ERROR(CheckSupportedDSpark(config, options));
  auto impl = std::make_unique<Impl>();
  impl->c = V41View(config);
  impl->opt = options;
  impl->v41 = std::make_unique<V41Parts>();
  impl->v41->c = config;
  impl->v41->layers.resize(static_cast<size_t>(config.num_layers));
  if (!config.engram_layer_ids.empty()) {
    // A stand-in compressed token map (id mod the compressed vocabulary), as the presets' dirs.
    std::vector<int32_t> token_map(static_cast<size_t>(config.vocab_size));
    for (int64_t i = 0; i < config.vocab_size; ++i) {
      token_map[static_cast<size_t>(i)] =
          static_cast<int32_t>(i % config.engram_compressed_vocab_size);
    }
    DSINFER_ASSIGN_OR_RETURN(auto h,
                             deepseek_v41::EngramHasher::Build(config, std::move(token_map)));
    UploadEngramHasher(h, impl.get());
  }
  RandomBuilder rb(impl.get(), seed, deepseek_v41::WeightSchema(config));
  rb.EmbedHeadNorm(config.tie_word_embeddings);
  impl->layers.resize(static_cast<size_t>(config.num_layers));
  for (int l = 0; l < config.num_layers; ++l) {
    rb.Block(l, &impl->layers[l]);
    RandomV41Layer(rb, impl.get(), l);
  }
  if (options.dspark) RandomDSpark(impl.get(), seed);
  if (!options.paged) impl->AllocateState();
  impl->AllocateActivations();
  impl->AllocateV41();
  if (options.dspark) impl->AllocateDSpark();
  impl->stream.Synchronize();
  return std::unique_ptr<CudaModel>(new CudaModel(std::move(impl)));
}

}  // namespace dsinfer::model::deepseek_v4::cuda
