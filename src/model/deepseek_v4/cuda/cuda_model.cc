#include "model/deepseek_v4/cuda/cuda_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "backend/cuda/attention_sparse.cuh"
#include "backend/cuda/compressor.cuh"
#include "backend/cuda/hyper_connection.cuh"
#include "backend/cuda/indexer_topk.cuh"
#include "backend/cuda/linear.cuh"
#include "backend/cuda/moe_route.cuh"
#include "backend/cuda/norm.cuh"
#include "backend/cuda/random_fill.cuh"
#include "backend/cuda/runtime.h"
#include "backend/cuda/sample.cuh"
#include "base/check.h"
#include "io/quant.h"
#include "io/safetensors.h"
#include "model/deepseek_v4/rope_table.h"

namespace dsinfer::model::deepseek_v4::cuda {

namespace gpu = backend::cuda;
using gpu::WeightFormat;
using gpu::WeightRef;

namespace {

struct HcW {
  WeightRef fn;  // fp32 [(2+hc)*hc or hc, hc*D]
  float* base = nullptr;
  float* scale = nullptr;
};

struct CompressorW {
  int rate = 0, dim = 0;
  bool overlap = false;
  WeightRef wkv, wgate;  // [width, D]
  float* ape = nullptr;  // [rate, width]
  float* norm = nullptr; // [dim]
  int width() const { return overlap ? 2 * dim : dim; }
};

struct ExpertsW {
  WeightRef w1, w3, w2;  // shapes/formats; data/scale unused
  // Device arrays [E] of per-expert data / scale pointers.
  const void** w1_data = nullptr; const void** w1_scale = nullptr;
  const void** w3_data = nullptr; const void** w3_scale = nullptr;
  const void** w2_data = nullptr; const void** w2_scale = nullptr;
  size_t bytes_per_expert = 0;
};

struct BlockW {
  float* attn_norm = nullptr;
  float* ffn_norm = nullptr;
  HcW hc_attn, hc_ffn;
  WeightRef wq_a, wq_b, wkv, wo_a, wo_b;
  float* q_norm = nullptr;
  float* kv_norm = nullptr;
  float* sink = nullptr;
  int rate = 0;
  bool has_comp = false, has_idx = false;
  CompressorW comp;
  WeightRef idx_wq_b, idx_weights_proj;
  CompressorW idx_comp;
  WeightRef gate;
  float* gate_bias = nullptr;
  int32_t* tid2eid = nullptr;
  ExpertsW experts;
  bool has_shared = false;
  WeightRef sh_w1, sh_w3, sh_w2;
};

struct LayerState {
  gpu::RingRef window;
  gpu::RingRef comp_rows;
  gpu::ListRef comp_entries;
  gpu::RingRef index_rows;
  gpu::ListRef index_entries;
};

constexpr int kMetaArrays = 7;  // ids, pos, slot, seg_begin, seg_start, seg_count, head rows
constexpr int kRollbackSlack = 16;

}  // namespace

struct CudaModel::Impl {
  io::DeepseekV4Config c;
  CudaModelOptions opt;
  std::vector<gpu::DeviceBuffer> owned;  // every device allocation of weights and state
  size_t weight_bytes = 0;
  size_t dense_bytes = 0;

  WeightRef embed;  // bf16 or f32 [V, D]
  WeightRef head;
  float* norm = nullptr;
  HcW hc_head;
  std::vector<BlockW> layers;
  float* inv_main = nullptr;
  float* inv_compress = nullptr;

  std::vector<LayerState> state;
  std::vector<int64_t> lengths;
  std::vector<bool> used;

  gpu::Stream stream;
  gpu::PinnedBuffer meta_host;  // [kMetaArrays, max_tokens] int32
  gpu::PinnedBuffer sampled_host;
  int32_t* meta_dev = nullptr;
  int32_t* sampled_dev = nullptr;
  int64_t logits_rows = 0;

  // Activations [max_tokens, ...].
  float *X, *mix, *post, *comb, *xn, *cq, *q, *kv, *proj, *iproj, *qi, *wi, *o, *z, *y;
  int32_t *sel, *sel_count;
  float* iscores = nullptr;  // indexer score scratch [iscore_rows, index entries capacity]
  int64_t iscore_rows = 0;
  float *rlog, *rwt;
  int32_t *rsel, *counts, *active, *num_active, *offsets, *pairs;
  float *g, *gu, *ys, *sg, *su, *sy;
  float *xs, *hz, *logits;

  std::map<int64_t, std::unique_ptr<gpu::Graph>> graphs;
  gpu::EventLog* profile = nullptr;  // eager per-op breakdown when set
  void Mark(const char* name) {
    if (profile) profile->Mark(stream.get(), name);
  }

  template <typename T>
  T* Alloc(int64_t count) {
    owned.emplace_back(static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(T));
    return owned.back().as<T>();
  }
  float* UploadF32(const std::vector<float>& v) {
    float* p = Alloc<float>(static_cast<int64_t>(v.size()));
    gpu::CopyToDeviceSync(p, v.data(), v.size() * 4);
    return p;
  }

  gpu::TokenMeta Meta(int64_t n) const {
    const int64_t T = opt.max_tokens;
    gpu::TokenMeta m;
    m.ids = meta_dev;
    m.pos = meta_dev + T;
    m.slot = meta_dev + 2 * T;
    m.seg_begin = meta_dev + 3 * T;
    m.seg_start = meta_dev + 4 * T;
    m.seg_count = meta_dev + 5 * T;
    m.n = n;
    return m;
  }
  const int32_t* HeadRows() const { return meta_dev + 6 * opt.max_tokens; }
  const float* InvFreq(int rate) const { return rate == 0 ? inv_main : inv_compress; }

  void AllocateState();
  void AllocateActivations();
  void Linear(const WeightRef& w, const float* x, int64_t ldx, int64_t m, float* yout, int64_t ldy,
              int64_t group_rows = 0, int64_t group_stride = 0) {
    gpu::LinearParams p;
    p.w = w; p.x = x; p.ldx = ldx; p.m = m; p.y = yout; p.ldy = ldy;
    p.x_group_rows = group_rows; p.x_group_stride = group_stride;
    gpu::LaunchLinear(p, stream.get());
  }
  void RmsNorm(const float* x, int64_t ldx, float* yv, int64_t ldy, int64_t rows, int64_t dim,
               const float* weight) {
    gpu::RmsNormParams p;
    p.x = x; p.ldx = ldx; p.y = yv; p.ldy = ldy; p.rows = rows; p.dim = dim; p.weight = weight;
    p.eps = static_cast<float>(c.rms_norm_eps);
    gpu::LaunchRmsNorm(p, stream.get());
  }
  void Rope(float* x, int64_t n, int64_t heads, int64_t dim, const float* inv, bool inverse = false) {
    gpu::RopeParams p;
    p.x = x; p.tokens = n; p.heads = heads; p.head_stride = dim; p.token_stride = heads * dim;
    p.dim = dim; p.rope_dim = c.rope_head_dim; p.inv_freq = inv; p.pos = Meta(n).pos;
    p.inverse = inverse;
    gpu::LaunchRope(p, stream.get());
  }
  // Split-k partials of fn · x and x·x over the flat streams (hc * D) into `mix`.
  void HcMix(const float* xs_, int64_t n, const WeightRef& fn) {
    gpu::HcMixParams p;
    p.X = xs_; p.ldx = c.hc_mult * c.hidden_size; p.K = p.ldx; p.fn = static_cast<const float*>(fn.data);
    p.nout = static_cast<int>(fn.n); p.n = n; p.part = mix;
    gpu::LaunchHcMix(p, stream.get());
  }
  void HcPre(const HcW& w, int64_t n, const float* norm_w) {
    const int64_t D = c.hidden_size, hc = c.hc_mult;
    HcMix(X, n, w.fn);
    gpu::HcPreFinishParams p;
    p.part = mix; p.rms_eps = static_cast<float>(c.rms_norm_eps); p.norm_w = norm_w; p.xn = xn;
    p.base = w.base; p.scale = w.scale; p.X = X; p.post = post; p.comb = comb;
    p.n = n; p.hc = static_cast<int>(hc); p.D = D; p.sinkhorn_iters = c.hc_sinkhorn_iters;
    p.hc_eps = static_cast<float>(c.hc_eps);
    gpu::LaunchHcPreFinish(p, stream.get());
  }
  void HcPost(int64_t n) {
    gpu::HcPostParams p;
    p.y = y; p.post = post; p.comb = comb; p.X = X; p.n = n; p.hc = c.hc_mult; p.D = c.hidden_size;
    gpu::LaunchHcPost(p, stream.get());
  }
  void Compressor(const CompressorW& cw, const float* x, int64_t n, float* pr, const gpu::RingRef& rows,
                  const gpu::ListRef& entries) {
    const int64_t D = c.hidden_size, width = cw.width();
    Linear(cw.wkv, x, D, n, pr, 2 * width);
    Linear(cw.wgate, x, D, n, pr + width, 2 * width);
    gpu::LaunchAddApe(pr, n, width, cw.ape, cw.rate, Meta(n).pos, stream.get());
    gpu::CompressEmitParams p;
    p.meta = Meta(n); p.proj = pr; p.rows = rows; p.entries = entries; p.rate = cw.rate;
    p.dim = cw.dim; p.overlap = cw.overlap; p.norm = cw.norm; p.eps = static_cast<float>(c.rms_norm_eps);
    p.rope_dim = c.rope_head_dim; p.inv_freq = inv_compress;
    gpu::LaunchCompressEmit(p, stream.get());
  }
  void RingAppend(const float* src, int64_t ld, const gpu::RingRef& ring, int64_t n) {
    gpu::RingAppendParams p;
    p.meta = Meta(n); p.src = src; p.ld = ld; p.ring = ring;
    gpu::LaunchRingAppend(p, stream.get());
  }
  void Attention(const BlockW& w, const LayerState& st, int64_t n);
  void Moe(const BlockW& w, int layer, int64_t n);
  void Block(const BlockW& w, int layer, int64_t n) {
    Mark("hc_pre+norm");
    HcPre(w.hc_attn, n, w.attn_norm);
    Attention(w, state[layer], n);
    Mark("hc_post");
    HcPost(n);
    Mark("hc_pre+norm");
    HcPre(w.hc_ffn, n, w.ffn_norm);
    Moe(w, layer, n);
    Mark("hc_post");
    HcPost(n);
  }
  // Embedding, every block, and the head over `rows` selected rows -> logits [rows, V].
  void Run(int64_t n, int64_t rows) {
    gpu::EmbedParams ep;
    ep.table = embed.data; ep.table_bf16 = embed.format == WeightFormat::kBf16; ep.ids = Meta(n).ids;
    ep.X = X; ep.n = n; ep.hc = c.hc_mult; ep.D = c.hidden_size;
    gpu::LaunchEmbed(ep, stream.get());
    for (int l = 0; l < c.num_layers; ++l) Block(layers[l], l, n);
    const int64_t D = c.hidden_size, hc = c.hc_mult;
    Mark("hc_head+head");
    gpu::LaunchGatherRows(X, HeadRows(), rows, hc * D, xs, stream.get());
    HcMix(xs, rows, hc_head.fn);
    gpu::HcHeadFinishParams hp;
    hp.part = mix; hp.rms_eps = static_cast<float>(c.rms_norm_eps); hp.norm_w = norm; hp.base = hc_head.base; hp.scale = hc_head.scale; hp.X = xs; hp.out = hz;
    hp.n = rows; hp.hc = static_cast<int>(hc); hp.D = D; hp.hc_eps = static_cast<float>(c.hc_eps);
    gpu::LaunchHcHeadFinish(hp, stream.get());
    Linear(head, hz, D, rows, logits, c.vocab_size);
  }
};

void CudaModel::Impl::Attention(const BlockW& w, const LayerState& st, int64_t n) {
  const int64_t D = c.hidden_size, H = c.num_heads, d = c.head_dim, qlr = c.q_lora_rank;
  const float* inv = InvFreq(w.rate);
  Mark("attn_q_kv_proj");
  Linear(w.wq_a, xn, D, n, cq, qlr);
  RmsNorm(cq, qlr, cq, qlr, n, qlr, w.q_norm);
  Linear(w.wq_b, cq, qlr, n, q, H * d);
  RmsNorm(q, d, q, d, n * H, d, nullptr);
  Rope(q, n, H, d, inv);
  Linear(w.wkv, xn, D, n, kv, d);
  RmsNorm(kv, d, kv, d, n, d, w.kv_norm);
  Rope(kv, n, 1, d, inv);
  const int64_t IH = c.index_n_heads, Id = c.index_head_dim;
  Mark("compressors");
  if (w.has_comp) Compressor(w.comp, xn, n, proj, st.comp_rows, st.comp_entries);
  if (w.has_idx) {
    Compressor(w.idx_comp, xn, n, iproj, st.index_rows, st.index_entries);
    Linear(w.idx_wq_b, cq, qlr, n, qi, IH * Id);
    Rope(qi, n, IH, Id, inv_compress);
    Linear(w.idx_weights_proj, xn, D, n, wi, IH);
    gpu::LaunchScale(wi, n * IH, 1.0f / std::sqrt(static_cast<float>(IH)), stream.get());
  }
  if (w.has_comp) RingAppend(proj, 2 * w.comp.width(), st.comp_rows, n);
  if (w.has_idx) {
    RingAppend(iproj, 2 * w.idx_comp.width(), st.index_rows, n);
    Mark("indexer_topk");
    gpu::IndexerTopKParams ip;
    ip.meta = Meta(n); ip.q = qi; ip.weights = wi; ip.keys = st.index_entries;
    ip.heads = static_cast<int>(IH); ip.head_dim = static_cast<int>(Id); ip.rate = w.rate;
    ip.topk = c.index_topk; ip.max_entries = static_cast<int>(st.index_entries.capacity);
    ip.sel = sel; ip.sel_count = sel_count; ip.scores = iscores; ip.score_rows = iscore_rows;
    gpu::LaunchIndexerTopK(ip, stream.get());
  }
  Mark("attention");
  gpu::SparseAttentionParams ap;
  ap.meta = Meta(n); ap.q = q; ap.kv = kv; ap.window = st.window;
  ap.comp = st.comp_entries;
  ap.sel = w.has_idx ? sel : nullptr;
  ap.sel_count = w.has_idx ? sel_count : nullptr;
  ap.sel_stride = c.index_topk;
  ap.rate = w.has_comp ? w.rate : 0;
  ap.window_size = c.sliding_window;
  ap.heads = static_cast<int>(H); ap.dim = static_cast<int>(d);
  ap.sink = w.sink; ap.scale = 1.0f / std::sqrt(static_cast<float>(d));
  ap.rope_dim = c.rope_head_dim; ap.inv_freq = inv; ap.out = o;
  gpu::LaunchSparseAttention(ap, stream.get());
  RingAppend(kv, d, st.window, n);
  Mark("attn_out_proj");
  const int64_t G = c.o_groups, olr = c.o_lora_rank;
  Linear(w.wo_a, o, H * d, n, z, G * olr, olr, H * d / G);
  Linear(w.wo_b, z, G * olr, n, y, D);
}

void CudaModel::Impl::Moe(const BlockW& w, int layer, int64_t n) {
  const int64_t D = c.hidden_size, E = c.n_routed_experts, K = c.num_experts_per_tok;
  const int64_t I = c.moe_intermediate_size, P = n * K;
  Mark("moe_router+group");
  Linear(w.gate, xn, D, n, rlog, E);
  gpu::MoeRouteParams rp;
  rp.logits = rlog; rp.bias = w.gate_bias; rp.tid2eid = w.tid2eid; rp.ids = Meta(n).ids; rp.n = n;
  rp.E = static_cast<int>(E); rp.K = static_cast<int>(K);
  rp.scoring = c.scoring_func == "sqrtsoftplus" ? gpu::ScoringFunc::kSqrtSoftplus
             : c.scoring_func == "softmax"      ? gpu::ScoringFunc::kSoftmax
                                                : gpu::ScoringFunc::kSigmoid;
  rp.norm_topk_prob = c.norm_topk_prob;
  rp.routed_scaling_factor = static_cast<float>(c.routed_scaling_factor);
  rp.sel = rsel; rp.weight = rwt;
  gpu::LaunchMoeRoute(rp, stream.get());
  gpu::MoeGroupParams gp;
  gp.sel = rsel; gp.pairs = P; gp.E = static_cast<int>(E); gp.counts = counts; gp.active = active;
  gp.num_active = num_active + layer; gp.offsets = offsets; gp.pair_list = pairs;
  gpu::LaunchMoeGroup(gp, stream.get());
  const ExpertsW& ex = w.experts;
  auto expert = [&](const WeightRef& shape, const void** data, const void** scale, const float* x,
                    int64_t ldx, int div, float* out, int64_t ldy) {
    gpu::ExpertLinearParams p;
    p.shape = shape; p.data = data; p.scale = scale; p.x = x; p.ldx = ldx; p.x_row_div = div;
    p.y = out; p.ldy = ldy; p.active = active; p.num_active = num_active + layer; p.offsets = offsets;
    p.pairs = pairs; p.max_slots = static_cast<int>(std::min(E, P)); p.total_pairs = P;
    gpu::LaunchExpertLinear(p, stream.get());
  };
  Mark("moe_routed_experts");
  expert(ex.w1, ex.w1_data, ex.w1_scale, xn, D, static_cast<int>(K), g, I);
  expert(ex.w3, ex.w3_data, ex.w3_scale, xn, D, static_cast<int>(K), gu, I);
  const float lim = static_cast<float>(c.swiglu_limit);
  gpu::LaunchSwiglu(g, gu, P, I, I, lim, stream.get());
  expert(ex.w2, ex.w2_data, ex.w2_scale, g, I, 1, ys, D);
  Mark("moe_shared+combine");
  if (w.has_shared) {
    Linear(w.sh_w1, xn, D, n, sg, I);
    Linear(w.sh_w3, xn, D, n, su, I);
    gpu::LaunchSwiglu(sg, su, n, I, I, lim, stream.get());
    Linear(w.sh_w2, sg, I, n, sy, D);
  }
  gpu::MoeCombineParams cp;
  cp.y = ys; cp.sel = rsel; cp.weight = rwt; cp.shared = w.has_shared ? sy : nullptr; cp.out = y;
  cp.n = n; cp.K = static_cast<int>(K); cp.D = D;
  gpu::LaunchMoeCombine(cp, stream.get());
}

void CudaModel::Impl::AllocateState() {
  const int S = opt.max_seqs;
  const int64_t L = opt.max_len, d = c.head_dim;
  state.resize(c.num_layers);
  for (int l = 0; l < c.num_layers; ++l) {
    LayerState& s = state[l];
    const int64_t wcap = c.sliding_window - 1 + kRollbackSlack;
    s.window = {Alloc<float>(S * wcap * d), wcap, d, wcap * d};
    const int rate = c.compress_ratios[l];
    if (rate == 0) continue;
    const bool csa = rate == c.csa_rate;
    const int64_t width = csa ? 2 * d : d;
    const int64_t rcap = (csa ? 2 * rate : rate) + kRollbackSlack;
    s.comp_rows = {Alloc<float>(S * rcap * 2 * width), rcap, 2 * width, rcap * 2 * width};
    const int64_t ecap = L / rate + 1;
    s.comp_entries = {Alloc<float>(S * ecap * d), d, ecap * d, ecap};
    if (csa) {
      const int64_t Id = c.index_head_dim, iw = 2 * Id;
      s.index_rows = {Alloc<float>(S * rcap * 2 * iw), rcap, 2 * iw, rcap * 2 * iw};
      s.index_entries = {Alloc<float>(S * ecap * Id), Id, ecap * Id, ecap};
    }
  }
  lengths.assign(S, 0);
  used.assign(S, false);
}

void CudaModel::Impl::AllocateActivations() {
  const int64_t T = opt.max_tokens, D = c.hidden_size, hc = c.hc_mult, H = c.num_heads;
  const int64_t d = c.head_dim, E = c.n_routed_experts, K = c.num_experts_per_tok;
  const int64_t I = c.moe_intermediate_size, IH = c.index_n_heads, Id = c.index_head_dim;
  X = Alloc<float>(T * hc * D);
  mix = Alloc<float>(std::max<int64_t>(T, opt.max_seqs) * gpu::HcMixSlices(hc * D) * ((2 + hc) * hc + 1));
  post = Alloc<float>(T * hc);
  comb = Alloc<float>(T * hc * hc);
  xn = Alloc<float>(T * D);
  cq = Alloc<float>(T * c.q_lora_rank);
  q = Alloc<float>(T * H * d);
  kv = Alloc<float>(T * d);
  proj = Alloc<float>(T * 4 * d);
  iproj = Alloc<float>(T * 4 * Id);
  qi = Alloc<float>(T * IH * Id);
  wi = Alloc<float>(T * IH);
  o = Alloc<float>(T * H * d);
  z = Alloc<float>(T * c.o_groups * c.o_lora_rank);
  y = Alloc<float>(T * D);
  sel = Alloc<int32_t>(T * std::max(c.index_topk, 1));
  sel_count = Alloc<int32_t>(T);
  {
    int64_t icap = 0;
    for (const LayerState& st : state) icap = std::max<int64_t>(icap, st.index_entries.capacity);
    // Score rows per indexer launch: all tokens, or as many as 16M scores (64 MB) allow.
    iscore_rows = std::max<int64_t>(1, std::min<int64_t>(T, (int64_t{16} << 20) / std::max<int64_t>(icap, 1)));
    iscores = Alloc<float>(iscore_rows * std::max<int64_t>(icap, 1));
  }
  rlog = Alloc<float>(T * E);
  rwt = Alloc<float>(T * K);
  rsel = Alloc<int32_t>(T * K);
  counts = Alloc<int32_t>(E);
  active = Alloc<int32_t>(E);
  num_active = Alloc<int32_t>(c.num_layers);
  offsets = Alloc<int32_t>(E + 1);
  pairs = Alloc<int32_t>(T * K);
  g = Alloc<float>(T * K * I);
  gu = Alloc<float>(T * K * I);
  ys = Alloc<float>(T * K * D);
  sg = Alloc<float>(T * I);
  su = Alloc<float>(T * I);
  sy = Alloc<float>(T * D);
  logits_rows = opt.all_logits ? T : std::max<int64_t>(opt.max_seqs, 1);
  xs = Alloc<float>(logits_rows * hc * D);
  hz = Alloc<float>(logits_rows * D);
  logits = Alloc<float>(logits_rows * c.vocab_size);
  meta_dev = Alloc<int32_t>(kMetaArrays * T);
  meta_host = gpu::PinnedBuffer(kMetaArrays * T * sizeof(int32_t));
  sampled_dev = Alloc<int32_t>(T);
  sampled_host = gpu::PinnedBuffer(T * sizeof(int32_t));
  for (const auto& st : state) {
    if (st.index_entries.data) {
      gpu::PrepareIndexerTopK(c.index_n_heads, c.index_head_dim, static_cast<int>(st.index_entries.capacity));
    }
  }
  RopeTables rope = RopeTables::Build(c);
  inv_main = UploadF32(rope.main);
  inv_compress = UploadF32(rope.compress);
}

namespace {

Status CheckSupported(const io::DeepseekV4Config& c) {
  if (c.head_dim > 512) return Unimplemented("CUDA backend: head_dim > 512");
  if (c.hc_mult > 8) return Unimplemented("CUDA backend: hc_mult > 8");
  if (c.index_n_heads > 64) return Unimplemented("CUDA backend: index_n_heads > 64");
  if (c.index_head_dim % 4 != 0) return Unimplemented("CUDA backend: index_head_dim % 4 != 0");
  if (c.n_routed_experts > 1024 || c.num_experts_per_tok > 16) {
    return Unimplemented("CUDA backend: more than 1024 experts or 16 per token");
  }
  if (c.rope_head_dim % 2 != 0) return Unimplemented("CUDA backend: odd rope_head_dim");
  return Status::Ok();
}

// ---- loading from a checkpoint ----

class GpuLoader {
 public:
  GpuLoader(const io::Checkpoint& ckpt, CudaModel::Impl* m) : ckpt_(ckpt), m_(m) {}

  StatusOr<WeightRef> Matrix(const std::string& name, int64_t rows, int64_t cols) {
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
    void* data = m_->Alloc<uint8_t>(expect);
    gpu::CopyToDeviceSync(data, w->data, w->nbytes);
    r.data = data;
    if (r.format == WeightFormat::kFp8 || r.format == WeightFormat::kFp4) {
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
      gpu::CopyToDeviceSync(sd, s->data, s->nbytes);
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
    DSINFER_ASSIGN_OR_RETURN(cw->wkv, Matrix(p + "wkv", width, c.hidden_size));
    DSINFER_ASSIGN_OR_RETURN(cw->wgate, Matrix(p + "wgate", width, c.hidden_size));
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
    const void** dev[6];
    for (int i = 0; i < 6; ++i) {
      dev[i] = m_->Alloc<const void*>(E);
      gpu::CopyToDeviceSync(dev[i], tables[i].data(), E * sizeof(void*));
    }
    ex->w1_data = dev[0]; ex->w1_scale = dev[1]; ex->w3_data = dev[2]; ex->w3_scale = dev[3];
    ex->w2_data = dev[4]; ex->w2_scale = dev[5];
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

CudaModel::CudaModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaModel::~CudaModel() = default;

const io::DeepseekV4Config& CudaModel::config() const { return impl_->c; }

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
  DSINFER_ASSIGN_OR_RETURN(impl->head, ld.Matrix("head", V, D));
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
    void* d = m_->Alloc<uint8_t>(n * k);
    Fill(d, n * k, gpu::RandomKind::kFp8, 0, 64.0f);
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
    Fill(s, n * k / 32, gpu::RandomKind::kByte, static_cast<float>(ExpFor(1.0 / (2.93 * std::sqrt(double(k))))), 0);
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
    cw.wkv = Bf16(cw.width(), c.hidden_size, std);
    cw.wgate = Bf16(cw.width(), c.hidden_size, std);
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
    const void** dev[6];
    for (int i = 0; i < 6; ++i) {
      dev[i] = m_->Alloc<const void*>(E);
      gpu::CopyToDeviceSync(dev[i], tables[i].data(), E * sizeof(void*));
    }
    ExpertsW& ex = b->experts;
    ex.w1_data = dev[0]; ex.w1_scale = dev[1]; ex.w3_data = dev[2]; ex.w3_scale = dev[3];
    ex.w2_data = dev[4]; ex.w2_scale = dev[5];
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

StatusOr<int> CudaModel::NewSequence() {
  for (int s = 0; s < impl_->opt.max_seqs; ++s) {
    if (!impl_->used[s]) {
      impl_->used[s] = true;
      impl_->lengths[s] = 0;
      return s;
    }
  }
  return ResourceExhausted("all " + std::to_string(impl_->opt.max_seqs) + " CUDA state slots are in use");
}

void CudaModel::FreeSequence(int slot) {
  DSINFER_CHECK(slot >= 0 && slot < impl_->opt.max_seqs);
  impl_->used[slot] = false;
}

int64_t CudaModel::length(int slot) const { return impl_->lengths[slot]; }

StatusOr<std::vector<float>> CudaModel::Forward(const std::vector<Chunk>& chunks, LogitsRows rows) {
  Impl& m = *impl_;
  const int64_t T = m.opt.max_tokens;
  int64_t n = 0;
  std::vector<int> seen;
  for (const auto& ch : chunks) {
    if (ch.slot < 0 || ch.slot >= m.opt.max_seqs || !m.used[ch.slot]) return InvalidArgument("bad CUDA state slot");
    if (std::find(seen.begin(), seen.end(), ch.slot) != seen.end()) {
      return InvalidArgument("a request appears twice in one forward batch");
    }
    seen.push_back(ch.slot);
    for (int32_t id : ch.ids) {
      if (id < 0 || id >= m.c.vocab_size) {
        return InvalidArgument("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                               std::to_string(m.c.vocab_size) + ")");
      }
    }
    if (m.lengths[ch.slot] + static_cast<int64_t>(ch.ids.size()) > m.opt.max_len) {
      return OutOfRange("sequence exceeds the CUDA state capacity of " + std::to_string(m.opt.max_len));
    }
    n += static_cast<int64_t>(ch.ids.size());
  }
  if (n > T) return OutOfRange("forward of " + std::to_string(n) + " rows exceeds max_tokens " + std::to_string(T));
  if (n == 0) return std::vector<float>{};
  int32_t* h = m.meta_host.as<int32_t>();
  int64_t r = 0, nrows = 0;
  for (const auto& ch : chunks) {
    const int64_t begin = r, start = m.lengths[ch.slot], count = static_cast<int64_t>(ch.ids.size());
    for (int64_t i = 0; i < count; ++i, ++r) {
      h[r] = ch.ids[i];
      h[T + r] = static_cast<int32_t>(start + i);
      h[2 * T + r] = ch.slot;
      h[3 * T + r] = static_cast<int32_t>(begin);
      h[4 * T + r] = static_cast<int32_t>(start);
      h[5 * T + r] = static_cast<int32_t>(count);
    }
    if (count == 0) continue;
    if (rows == LogitsRows::kAll) {
      for (int64_t i = 0; i < count; ++i) h[6 * T + nrows++] = static_cast<int32_t>(begin + i);
    } else {
      h[6 * T + nrows++] = static_cast<int32_t>(begin + count - 1);
    }
  }
  if (nrows > m.logits_rows) return OutOfRange("more logits rows than the CUDA model was sized for");
  gpu::CopyToDevice(m.meta_dev, h, kMetaArrays * T * sizeof(int32_t), m.stream.get());
  m.Run(n, nrows);
  std::vector<float> out(static_cast<size_t>(nrows * m.c.vocab_size));
  gpu::CopyToHost(out.data(), m.logits, out.size() * 4, m.stream.get());
  m.stream.Synchronize();
  for (const auto& ch : chunks) m.lengths[ch.slot] += static_cast<int64_t>(ch.ids.size());
  return out;
}

StatusOr<std::vector<int32_t>> CudaModel::DecodeStep(const std::vector<int>& slots,
                                                     const std::vector<int32_t>& ids, bool use_graph) {
  Impl& m = *impl_;
  const int64_t n = static_cast<int64_t>(slots.size()), T = m.opt.max_tokens;
  if (ids.size() != slots.size()) return InvalidArgument("DecodeStep: slots and ids differ in size");
  if (n == 0) return std::vector<int32_t>{};
  if (n > T || n > m.logits_rows) return OutOfRange("DecodeStep batch exceeds the CUDA buffers");
  int32_t* h = m.meta_host.as<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    const int s = slots[i];
    if (s < 0 || s >= m.opt.max_seqs || !m.used[s]) return InvalidArgument("bad CUDA state slot");
    if (ids[i] < 0 || ids[i] >= m.c.vocab_size) return InvalidArgument("token id outside the vocabulary");
    if (m.lengths[s] + 1 > m.opt.max_len) return OutOfRange("sequence exceeds the CUDA state capacity");
    h[i] = ids[i];
    h[T + i] = static_cast<int32_t>(m.lengths[s]);
    h[2 * T + i] = s;
    h[3 * T + i] = static_cast<int32_t>(i);
    h[4 * T + i] = static_cast<int32_t>(m.lengths[s]);
    h[5 * T + i] = 1;
    h[6 * T + i] = static_cast<int32_t>(i);
  }
  auto step = [&] {
    gpu::CopyToDevice(m.meta_dev, h, kMetaArrays * T * sizeof(int32_t), m.stream.get());
    m.Mark("embed");
    m.Run(n, n);
    m.Mark("sample");
    gpu::SampleParams sp;
    sp.logits = m.logits; sp.rows = n; sp.vocab = m.c.vocab_size; sp.temperature = 0;
    sp.out = m.sampled_dev;
    gpu::LaunchSample(sp, m.stream.get());
    gpu::CopyToHost(m.sampled_host.get(), m.sampled_dev, n * sizeof(int32_t), m.stream.get());
  };
  if (use_graph) {
    auto& graph = m.graphs[n];
    if (!graph) {
      graph = std::make_unique<gpu::Graph>();
      graph->BeginCapture(m.stream.get());
      step();
      graph->EndCapture(m.stream.get());
    }
    graph->Launch(m.stream.get());
  } else {
    step();
  }
  m.Mark("end");
  m.stream.Synchronize();
  std::vector<int32_t> out(m.sampled_host.as<int32_t>(), m.sampled_host.as<int32_t>() + n);
  for (int s : slots) m.lengths[s] += 1;
  return out;
}

Status CudaModel::FillSyntheticState(int slot, int64_t length, uint64_t seed) {
  Impl& m = *impl_;
  if (slot < 0 || slot >= m.opt.max_seqs || !m.used[slot]) return InvalidArgument("bad CUDA state slot");
  if (length > m.opt.max_len) return OutOfRange("synthetic length exceeds the state capacity");
  uint64_t k = seed * 7919 + static_cast<uint64_t>(slot) * 104729;
  auto fill = [&](float* base, int64_t stride) {
    if (!base) return;
    gpu::RandomFillParams f;
    f.data = base + slot * stride; f.count = stride; f.kind = gpu::RandomKind::kF32Normal;
    f.seed = k++; f.mean = 0; f.std = 1;
    gpu::LaunchRandomFill(f, m.stream.get());
  };
  for (auto& s : m.state) {
    fill(s.window.data, s.window.slot_stride);
    fill(s.comp_rows.data, s.comp_rows.slot_stride);
    fill(s.comp_entries.data, s.comp_entries.slot_stride);
    fill(s.index_rows.data, s.index_rows.slot_stride);
    fill(s.index_entries.data, s.index_entries.slot_stride);
  }
  m.stream.Synchronize();
  m.lengths[slot] = length;
  return Status::Ok();
}

std::vector<std::pair<std::string, double>> CudaModel::ProfileDecodeStep(const std::vector<int>& slots,
                                                                        const std::vector<int32_t>& ids) {
  gpu::EventLog log;
  impl_->profile = &log;
  auto r = DecodeStep(slots, ids, false);
  impl_->profile = nullptr;
  auto out = log.Collect();
  if (!r.ok()) out.clear();
  return out;
}

size_t CudaModel::weight_bytes() const { return impl_->weight_bytes; }
size_t CudaModel::dense_weight_bytes_per_step() const { return impl_->dense_bytes; }
size_t CudaModel::expert_bytes() const {
  return impl_->layers.empty() ? 0 : impl_->layers[0].experts.bytes_per_expert;
}

std::vector<int> CudaModel::LastActiveExperts() {
  std::vector<int> v(impl_->c.num_layers);
  gpu::CopyToHost(v.data(), impl_->num_active, v.size() * 4, impl_->stream.get());
  impl_->stream.Synchronize();
  return v;
}

}  // namespace dsinfer::model::deepseek_v4::cuda
