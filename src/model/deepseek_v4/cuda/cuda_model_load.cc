// Loading the CUDA model: from a checkpoint (weights kept in their formats) or device-random
// weights in the official formats (benchmarks). DeepSeek-V4 and the entry points here;
// DeepSeek-V4.1's parts in cuda_model_load_v41.cc; the loaders both use in cuda_model_load.h.
#include "model/deepseek_v4/cuda/cuda_model_load.h"

#include <cstdio>

#include "io/model_family.h"

namespace dsinfer::model::deepseek_v4::cuda {

Status CheckSupported(const io::DeepseekV4Config& c) {
  const int hc = static_cast<int>(c.hc_mult);
  DSINFER_RETURN_IF_ERROR(AttentionShape(c).Validate());
  if (c.kv_cache_dtype == io::KvCacheDtype::kFp8) {  // its attention: bf16 q, K=V and P
    gpu::SparseAttentionParams ap = AttentionShape(c);
    ap.kv_bf16 = ap.qp_bf16 = true;
    DSINFER_RETURN_IF_ERROR(ap.Validate());
  }
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

namespace {
// Rows per forward call: several kernels put a forward's rows on a grid's y dimension (at most
// 65,535 blocks); longer prompts are prefilled in chunks (the engine's chunked prefill).
constexpr int64_t kMaxForwardRows = 65535;
}  // namespace

Status CheckOptions(const CudaModelOptions& o) {
  if (o.max_tokens < 1 || o.max_tokens > kMaxForwardRows) {
    return InvalidArgument("CUDA model: max_tokens (rows per forward call) must be 1.." +
                           std::to_string(kMaxForwardRows) + ", not " +
                           std::to_string(o.max_tokens) + "; prefill longer prompts in chunks");
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<CudaModel>> CudaModel::Load(const std::string& model_dir,
                                                     const CudaModelOptions& options,
                                                     const ExpertFilter& holds) {
  if (!gpu::DeviceAvailable()) return Unimplemented("no CUDA device");
  DSINFER_RETURN_IF_ERROR(CheckOptions(options));
  auto impl = std::make_unique<Impl>();
  if (auto family = io::DetectModelFamily(model_dir);
      family.ok() && *family == io::ModelFamily::kDeepseekV41) {
    if (holds) return Unimplemented("expert parallelism on the GPU runs DeepSeek-V4 only");
    DSINFER_RETURN_IF_ERROR(LoadV41(model_dir, options, impl.get()));
    return std::unique_ptr<CudaModel>(new CudaModel(std::move(impl)));
  }
  if (options.dspark) {
    return InvalidArgument("the model has no DSpark drafter (DeepSeek-V4.1's)");
  }
  DSINFER_ASSIGN_OR_RETURN(impl->c, io::LoadDeepseekV4Config(model_dir));
  impl->c.kv_cache_dtype = io::ResolveV4KvCacheDtype(options.kv_cache_dtype);
  DSINFER_RETURN_IF_ERROR(CheckSupported(impl->c));
  impl->opt = options;
  impl->ep_holds = holds;
  DSINFER_ASSIGN_OR_RETURN(auto ckpt, io::Checkpoint::Open(model_dir));
  {  // a model that cannot fit is a clear error before anything is allocated
    int64_t bytes = 0;
    for (const auto& [name, view] : ckpt->tensors()) {
      int layer = 0, expert = 0, used = 0;  // an expert filter's other experts stay off the device
      if (holds &&
          std::sscanf(name.c_str(), "layers.%d.ffn.experts.%d.%n", &layer, &expert, &used) == 2 &&
          used > 0 && !holds(layer, expert)) {
        continue;
      }
      bytes += static_cast<int64_t>(view->nbytes);
    }
    const int64_t free = static_cast<int64_t>(gpu::DeviceFreeBytes());
    if (bytes > free) {
      return ResourceExhausted("the model's weights (" + std::to_string(bytes >> 20) +
                               " MiB) do not fit the GPU's free " + std::to_string(free >> 20) +
                               " MiB");
    }
  }
  const auto& c = impl->c;
  GpuLoader ld(*ckpt, impl.get());
  DSINFER_RETURN_IF_ERROR(ld.EmbedHeadNorm(c.tie_word_embeddings));
  DSINFER_ASSIGN_OR_RETURN(impl->hc_head.fn, ld.F32Matrix("hc_head_fn"));
  DSINFER_ASSIGN_OR_RETURN(impl->hc_head.base, ld.Vector("hc_head_base"));
  DSINFER_ASSIGN_OR_RETURN(impl->hc_head.scale, ld.Vector("hc_head_scale"));
  impl->layers.resize(c.num_layers);
  for (int l = 0; l < c.num_layers; ++l) {
    ld.set_moe_layer(l);
    DSINFER_RETURN_IF_ERROR(ld.Block("layers." + std::to_string(l) + ".", c.compress_ratios[l],
                                     c.hash_layers[l], &impl->layers[l]));
  }
  if (options.mtp) {
    if (!options.paged) return InvalidArgument("the CUDA model's MTP layer runs in paged mode");
    ld.set_moe_layer(c.num_layers);
    DSINFER_RETURN_IF_ERROR(ld.Mtp(&impl->mtp));
    impl->has_mtp = true;
  }
  if (!options.paged) impl->AllocateState();
  impl->AllocateActivations();
  return std::unique_ptr<CudaModel>(new CudaModel(std::move(impl)));
}

StatusOr<std::unique_ptr<CudaModel>> CudaModel::CreateRandom(const io::DeepseekV4Config& config,
                                                             uint64_t seed,
                                                             const CudaModelOptions& options) {
  if (!gpu::DeviceAvailable()) return Unimplemented("no CUDA device");
  DSINFER_RETURN_IF_ERROR(CheckOptions(options));
  DSINFER_RETURN_IF_ERROR(config.Validate());
  io::DeepseekV4Config resolved = config;
  resolved.kv_cache_dtype = io::ResolveV4KvCacheDtype(options.kv_cache_dtype);
  DSINFER_RETURN_IF_ERROR(CheckSupported(resolved));
  if (options.dspark) {
    return InvalidArgument("the model has no DSpark drafter (DeepSeek-V4.1's)");
  }
  auto impl = std::make_unique<Impl>();
  impl->c = resolved;
  impl->opt = options;
  RandomBuilder rb(impl.get(), seed);
  rb.EmbedHeadNorm(config.tie_word_embeddings);
  impl->hc_head = rb.HcHead("");
  impl->layers.resize(config.num_layers);
  for (int l = 0; l < config.num_layers; ++l) rb.Block(l, &impl->layers[l]);
  if (options.mtp) {
    if (!options.paged) return InvalidArgument("the CUDA model's MTP layer runs in paged mode");
    if (config.num_mtp_layers < 1) {
      return NotFound("MTP drafting: the preset has no MTP layer (num_nextn_predict_layers 0)");
    }
    rb.Mtp(&impl->mtp);
    impl->has_mtp = true;
  }
  if (!options.paged) impl->AllocateState();
  impl->AllocateActivations();
  impl->stream.Synchronize();
  return std::unique_ptr<CudaModel>(new CudaModel(std::move(impl)));
}

}  // namespace dsinfer::model::deepseek_v4::cuda
