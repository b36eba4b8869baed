// DeepSeek-V4.1 on the CUDA executor: its block (the Engram lookup before it, single-pass mHC),
// its CSA2 attention with KV sharing and the two-level indexer, and the Engram hash of a step's
// rows. The CPU model (model/deepseek_v41/model.cc, attention.cc, compressor.cc, engram.cc) is the
// reference; the cache rows are kept as fp32 values already on their FP8 / FP4 grids (the CPU's
// Unpack(Pack(x)) bits), so the V4 sparse attention reads them unchanged.
#include "model/deepseek_v4/cuda/cuda_model_impl.h"
#include "model/deepseek_v41/rope.h"

namespace dsinfer::model::deepseek_v4::cuda {

void CudaModel::Impl::BlockV41(const BlockW& w, int layer, int64_t n, bool one_per_seq) {
  V41Parts& v = *v41;
  if (v.layers[layer].engram >= 0) {
    Mark("engram");
    EngramV41(layer, n);  // the streams change before the block's mixes: no fused mix here
    mix_ready = false;
  }
  if (v.ds) DSparkTap(layer, n);  // the streams entering the layer, after its Engram lookup
  const bool attn_q =
      n <= kXnQuantRows && (TakesQuantizedRows(w.wq_a) || TakesQuantizedRows(w.wkv));
  Mark("hc_pre+norm");
  // The attention collapses with the previous site's pre (the first site: stream 0).
  HcPre(w.hc_attn, n, w.attn_norm, attn_q, kHcPreTriggerAttn, layer == 0 ? v.pre_first : v.pre_mix,
        v.pre_attn, w.wq_a.mma);
  AttentionV41(w, layer, n, one_per_seq, attn_q ? XnQuant() : XnCodes(w.wq_a.mma, n));
  Mark("hc_post");
  HcPost(n, nullptr, &w.hc_ffn.fn);
  Mark("hc_pre+norm");
  HcPre(w.hc_ffn, n, w.ffn_norm, false, kHcPreTriggerFfn, v.pre_attn, v.pre_mix, MoeCodes(w));
  const gpu::MoeCombineParams combine = Moe(w, layer, n);
  Mark("hc_post");
  const bool next_fused = layer + 1 < c.num_layers && v.layers[layer + 1].engram < 0;
  HcPost(n, &combine, next_fused ? &layers[layer + 1].hc_attn.fn : nullptr);
}

void CudaModel::Impl::AttentionV41(const BlockW& w, int layer, int64_t n, bool one_per_seq,
                                   const gpu::QuantizedRows& xnq) {
  V41Parts& v = *v41;
  const V41LayerW& x = v.layers[layer];
  const int64_t D = c.hidden_size, H = c.num_heads, d = c.head_dim, qlr = c.q_lora_rank;
  const int64_t IH = c.index_n_heads, Id = c.index_head_dim;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const float* inv = InvFreq(x.ratio);
  const LayerState& st = state[layer];
  const LayerState* group = x.ratio > 0 ? &state[x.source] : nullptr;

  // Window K=V: RMSNorm + RoPE, then onto the FP8 grid (the chunk's own rows too).
  Mark("attn_q_kv_proj");
  Linear(w.wkv, xn, D, n, kv, d, xnq);
  RmsNormRope(kv, n, 1, d, w.kv_norm, inv);
  gpu::LaunchFakeQuantRows(kv, n, d, d, gpu::FakeQuant::kFp8Pow2, 32, cur_stream());
  // One row per sequence: the append may precede the attention (as V4's Attention says).
  if (one_per_seq) RingAppend(kv, d, st.window, n);

  if (x.kv_source) {
    // The compressor: entries of every window this call closes (FP4 onto the e4m3-scaled grid),
    // and their index keys from the pre-RoPE latents.
    Mark("compressors");
    float* pr = x.ratio == 1 ? v.proj1 : proj;  // [n, 2d]: [kv | gate]
    // bf16 projections on the tensor cores: xn's bf16 parts, split once for both.
    const bool joint = x.ratio > 1 && x.comp_kv_gate.data != nullptr;
    const uint16_t* xns = nullptr;
    if (xn_split != nullptr && TcBf16(V41CompressorMatrix(x))) {
      gpu::LaunchBf16Split(xn, D, n, D, xn_split, cur_stream());
      xns = xn_split;
    }
    if (x.ratio == 1) {
      SplitLinear(x.comp_wkv, xn, xns, n, pr, 2 * d, xnq);
    } else if (joint) {
      SplitLinear(x.comp_kv_gate, xn, xns, n, pr, 2 * d, xnq);
    } else {
      SplitLinear(x.comp_wkv, xn, xns, n, pr, 2 * d, xnq);
      SplitLinear(x.comp_wgate, xn, xns, n, pr + d, 2 * d, xnq);
    }
    gpu::CompressEmitParams cp;
    cp.meta = Meta(n);
    cp.proj = pr;
    cp.rows = st.comp_rows;
    cp.entries = st.comp_entries;
    cp.rate = x.ratio;
    cp.dim = static_cast<int>(d);
    cp.overlap = false;
    cp.norm = x.comp_norm;
    cp.eps = eps;
    cp.rope_dim = c.rope_head_dim;
    cp.inv_freq = inv_compress;
    cp.latent_out = v.latent;
    cp.entry_quant = gpu::FakeQuant::kFp4E4m3;
    cp.entry_block = 16;
    gpu::LaunchCompressEmit(cp, cur_stream());
    if (x.ratio > 1) RingAppend(pr, 2 * d, st.comp_rows, n);
    Linear(x.idx_wk, v.latent, d, n, v.ikeys, Id);
    gpu::IndexKeyEmitParams kp;
    kp.meta = Meta(n);
    kp.keys = v.ikeys;
    kp.entries = st.index_entries;
    kp.rate = x.ratio;
    kp.dim = static_cast<int>(Id);
    kp.norm = x.idx_k_norm;
    kp.eps = eps;
    kp.rope_dim = c.rope_head_dim;
    kp.inv_freq = inv_compress;
    kp.fp4_block = 32;
    gpu::LaunchIndexKeyEmit(kp, cur_stream());
  }

  Mark("attn_q_kv_proj");
  Linear(w.wq_a, xn, D, n, cq, qlr, xnq);
  gpu::QuantizedRows cqq;
  if (n <= kNormQuantRows && qlr % 4 == 0 &&
      (TakesQuantizedRows(w.wq_b) || (x.index_source && TakesQuantizedRows(x.idx_wq_b)))) {
    cqq.q = cq_q;
    cqq.ldq = gpu::QuantizedLd(qlr);
    cqq.s = cq_s;
    cqq.lds = gpu::QuantizedScales(qlr);
  }
  RmsNorm(cq, qlr, cq, qlr, n, qlr, w.q_norm, cqq.q ? cq_q : nullptr, cq_s);
  if (x.index_source) {
    // The top-k over the group's index keys (a Reuse layer keeps the last one's); the candidate
    // source also picks the blocks the later layers' top-k is confined to.
    Mark("indexer_topk");
    Linear(x.idx_weights_proj, xn, D, n, wi, IH, xnq);  // heads^-0.5: in the scoring kernel
    Linear(x.idx_wq_b, cq, qlr, n, qi, IH * Id, cqq);   // RoPE + FP4: in the scoring kernel
    gpu::IndexerTopKParams ip;
    ip.meta = Meta(n);
    ip.q = qi;
    ip.weights = wi;
    ip.keys = group->index_entries;
    ip.heads = static_cast<int>(IH);
    ip.head_dim = static_cast<int>(Id);
    ip.rate = x.ratio;
    ip.topk = c.index_topk;  // = sel's stride, as the attention reads it
    ip.max_entries = static_cast<int>(group->index_entries.capacity);
    ip.weight_scale = 1.0f / std::sqrt(static_cast<float>(IH));
    ip.rope_dim = c.rope_head_dim;
    ip.inv_freq = inv_compress;
    ip.query_fp4_block = 32;
    ip.sel = sel;
    ip.sel_count = sel_count;
    ip.scores = iscores;
    ip.score_rows = iscore_rows;
    const int cand = v.c.candidate_source_layer_id;
    if (cand >= 0) {
      ip.candidate_block_size = v.c.candidate_block_size;
      ip.candidate_stride = v.candidate_stride;
      if (layer == cand) {
        ip.candidates_out = v.candidates;
        ip.candidate_topk_blocks = v.c.candidate_topk_blocks;
      } else if (cand < layer) {
        ip.candidates_in = v.candidates;
      }
    }
    gpu::LaunchIndexerTopK(ip, cur_stream());
  }
  Mark("attn_q_kv_proj");
  Linear(w.wq_b, cq, qlr, n, q, H * d, cqq);  // its RoPE (no per-head norm): in the attention
  Mark("attention");
  gpu::QuantizedRows oq;
  gpu::SparseAttentionParams ap = AttentionParams(w, st.window, n, inv, &oq);
  if (group != nullptr) {
    ap.comp = group->comp_entries;
    ap.sel = sel;
    ap.sel_count = sel_count;
    ap.rate = x.ratio;
  }
  ap.q_rope = true;  // V4.1's query has no per-head RMSNorm (ProjectLatentInputs)
  AttendAndProject(w, ap, oq, st.window, n, one_per_seq);
}

void CudaModel::Impl::EngramHashV41(int64_t n) {
  V41Parts& v = *v41;
  if (v.c.engram_layer_ids.empty()) return;
  Mark("engram");
  gpu::EngramHashParams hp;
  hp.meta = Meta(n);
  hp.tokens = v.tokens;
  hp.token_map = v.token_map;
  hp.vocab = v.c.vocab_size;
  hp.pad_id = v.c.engram_pad_id;
  hp.max_ngram = v.c.engram_max_ngram_size;
  hp.n_heads = v.c.engram_n_heads;
  hp.layers = static_cast<int>(v.c.engram_layer_ids.size());
  hp.multipliers = v.multipliers;
  hp.primes = v.primes;
  hp.offsets = v.offsets;
  hp.hash_ids = v.hash_ids;
  gpu::LaunchEngramHash(hp, cur_stream());
  // Then the rows' tokens join the look-back (the hash read the older ones).
  RingAppend(reinterpret_cast<const float*>(Meta(n).ids), 1, v.tokens, n);
}

void CudaModel::Impl::EngramV41(int layer, int64_t n) {
  V41Parts& v = *v41;
  const V41LayerW& x = v.layers[layer];
  const int64_t D = c.hidden_size, hc = c.hc_mult, hd = v.c.engram_head_dim;
  const int cols = (v.c.engram_max_ngram_size - 1) * v.c.engram_n_heads;
  const int64_t L = static_cast<int64_t>(v.c.engram_layer_ids.size());
  gpu::EngramGatherParams gp;
  gp.hash_ids = v.hash_ids + int64_t{x.engram} * cols;
  gp.hash_stride = L * cols;
  gp.cols = cols;
  gp.dim = hd;
  gp.table = x.engram_table;
  gp.table_format = x.engram_format;
  gp.scale = x.engram_scale;
  gp.n = n;
  gp.out = v.erows;
  gpu::LaunchEngramGather(gp, cur_stream());
  if (v.engram_split != nullptr && x.engram_wkv.format == WeightFormat::kBf16) {
    // On the tensor cores at every row count, as the head (CudaModelOptions::tc_bf16).
    TcLinear(x.engram_wkv, v.erows, cols * hd, n, v.ekv, (hc + 1) * D, v.engram_split);
  } else {
    Linear(x.engram_wkv, v.erows, cols * hd, n, v.ekv, (hc + 1) * D);
  }
  gpu::EngramGateParams ep;
  ep.kv = v.ekv;
  ep.qk_weight = x.engram_qk;
  ep.X = X;
  ep.n = n;
  ep.hc = static_cast<int>(hc);
  ep.D = D;
  ep.eps = static_cast<float>(c.rms_norm_eps);
  gpu::LaunchEngramGate(ep, cur_stream());
}

void CudaModel::Impl::AllocateV41() {
  V41Parts& v = *v41;
  const int64_t T = opt.max_tokens, hc = c.hc_mult, d = c.head_dim, D = c.hidden_size;
  v.pre_attn = Alloc<float>(T * hc);
  v.pre_mix = Alloc<float>(T * hc);
  v.pre_head = Alloc<float>(std::max(T, logits_rows) * hc);
  {
    std::vector<float> first(static_cast<size_t>(T * hc), 0.0f);
    for (int64_t t = 0; t < T; ++t) first[static_cast<size_t>(t * hc)] = 1.0f;
    v.pre_first = UploadF32(first);
  }
  v.latent = Alloc<float>(T * d);  // rows that close no window keep what they held: zeros first
  gpu::Memset(v.latent, 0, static_cast<size_t>(T * d) * sizeof(float), stream.get());
  v.ikeys = Alloc<float>(T * c.index_head_dim);
  v.proj1 = Alloc<float>(T * 2 * d);
  gpu::Memset(v.proj1, 0, static_cast<size_t>(T * 2 * d) * sizeof(float), stream.get());
  if (v.c.candidate_source_layer_id >= 0) {
    const int64_t blocks =
        (EntryCapacity(1) + v.c.candidate_block_size - 1) / v.c.candidate_block_size;
    v.candidate_stride = static_cast<int>(blocks);
    v.candidates = Alloc<uint8_t>(T * blocks);
  }
  if (!v.c.engram_layer_ids.empty()) {
    const int64_t L = static_cast<int64_t>(v.c.engram_layer_ids.size());
    const int64_t cols = int64_t{v.c.engram_max_ngram_size - 1} * v.c.engram_n_heads;
    v.hash_ids = Alloc<int64_t>(T * L * cols);
    v.erows = Alloc<float>(T * cols * v.c.engram_head_dim);
    v.ekv = Alloc<float>(T * (hc + 1) * D);
    if (opt.tc_bf16 && gpu::Bf16TcLinearSupports((hc + 1) * D, cols * v.c.engram_head_dim)) {
      v.engram_split = Alloc<uint16_t>(gpu::Bf16SplitElements(T, cols * v.c.engram_head_dim));
    }
  }
  const deepseek_v41::RopeTables rope = deepseek_v41::RopeTables::Build(v.c);
  inv_main = UploadF32(rope.main);
  inv_compress = UploadF32(rope.compress);
  stream.Synchronize();
}

}  // namespace dsinfer::model::deepseek_v4::cuda
