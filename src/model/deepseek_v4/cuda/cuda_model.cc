// CudaModel: the forward pass, the graph-captured decode step and the sequence API over
// CudaModel::Impl (cuda_model_impl.h); loading lives in cuda_model_load.cc, the state pools and
// paged forwards in cuda_model_state.cc.
#include <algorithm>

#include "distributed/communicator.h"
#include "model/deepseek_v4/cuda/cuda_model_impl.h"
#include "model/deepseek_v41/language_model.h"

namespace dsinfer::model::deepseek_v4::cuda {

gpu::SparseAttentionParams CudaModel::Impl::AttentionParams(const BlockW& w,
                                                            const gpu::RingRef& window, int64_t n,
                                                            const float* inv,
                                                            gpu::QuantizedRows* oq) {
  const int64_t H = c.num_heads, d = c.head_dim;
  gpu::SparseAttentionParams ap = AttentionShape(c);
  ap.meta = Meta(n);
  ap.q = q;
  ap.kv = kv;
  ap.window = window;
  ap.sink = w.sink;
  ap.inv_freq = inv;
  ap.out = o;
  ap.tc_workspace = attn_split;
  ap.tc_workspace_floats = attn_split != nullptr ? kAttnSplitFloats : 0;
  if (n <= kAttnOutQuantRows && TakesQuantizedRows(w.wo_a) && d % 128 == 0) {
    ap.out_q = o_q;
    ap.out_ldq = gpu::QuantizedLd(H * d);
    ap.out_s = o_s;
    ap.out_lds = gpu::QuantizedScales(H * d);
    oq->q = o_q;
    oq->ldq = ap.out_ldq;
    oq->s = o_s;
    oq->lds = ap.out_lds;
  } else if (w.wo_a.mma && d % 128 == 0) {
    // The FP8-instruction mode: the attention writes wo_a's input codes (into this stream's
    // scratch, which wo_a's launch would quantize o into) instead of o.
    const gpu::ActQuantScratch aq = Aq();
    DSINFER_CHECK(gpu::MmaQuantBytes(n, H * d) <= aq.q_bytes &&
                  gpu::MmaScaleCount(n, H * d) <= aq.s_count);
    *oq = gpu::MmaCodes(aq.q, aq.s, n, H * d);
    ap.out_c = aq.q;
    ap.out_ldc = oq->ldc;
    ap.out_cs = aq.s;
    ap.out_ldcs = oq->ldcs;
  }
  return ap;
}

void CudaModel::Impl::AttendAndProject(const BlockW& w, const gpu::SparseAttentionParams& ap,
                                       const gpu::QuantizedRows& oq, const gpu::RingRef& window,
                                       int64_t n, bool one_per_seq) {
  const int64_t D = c.hidden_size, H = c.num_heads, d = c.head_dim;
  // The row block's key pre-pass (KernelOptions::attention_row_prepass): where this forward's
  // sequences all start at position 0 (the uploaded metadata is the step's, not the MTP rows'),
  // the call takes the row block, and no graph is being captured (a replay may come with other
  // positions), the call's K=V rows and entries decoded once into row_keys (the same bits).
  if (row_keys != nullptr && meta_from_zero_dev == meta_dev && 2 * n * ap.dim <= row_keys_elems &&
      gpu::SparseAttentionTakesRowBlock(ap) && !gpu::Graph::Capturing(cur_stream())) {
    gpu::SparseAttentionParams pre = ap;
    gpu::LaunchRowKeysDecode(pre, row_keys, cur_stream());
    pre.keys16 = row_keys;
    gpu::LaunchSparseAttention(pre, cur_stream());
  } else {
    gpu::LaunchSparseAttention(ap, cur_stream());
  }
  if (!one_per_seq) RingAppend(ap.kv, ap.kv_row_floats(), window, n);
  Mark("attn_out_proj");
  const int64_t G = c.o_groups, olr = c.o_lora_rank;
  Linear(w.wo_a, o, H * d, n, z, G * olr, oq, olr, H * d / G);
  Linear(w.wo_b, z, G * olr, n, y, D);
}

void CudaModel::Impl::Attention(const BlockW& w, const LayerState& st, int64_t n,
                                bool one_per_seq, const gpu::QuantizedRows& xnq) {
  const int64_t D = c.hidden_size, H = c.num_heads, d = c.head_dim, qlr = c.q_lora_rank;
  const float* inv = InvFreq(w.rate);
  const int64_t IH = c.index_n_heads, Id = c.index_head_dim;
  // The K=V rows as the state stores them (the FP8 cache: packed, kv_packed).
  const backend::qc::PackedRow kv_format = WindowFormat(c).codec();
  const float* const kv_rows = kv_format.packed() ? kv_packed : kv;
  const int64_t kv_ld = kv_format.packed() ? kv_format.floats() : d;
  // The compressors' bf16 projections on the tensor cores take xn's bf16 parts, split once, on
  // branch 1 (branch 3 waits for them there), off the query's path.
  const uint16_t* xns = TcCompressors(w) ? xn_split : nullptr;
  // Branch 0: the indexer's head weights (first: its top-k waits for them, the attention for the
  // rest), the kv projection (and, one row per sequence, its window-ring append). Branch 1: the
  // compressor and its ring. Branch 3: the indexer's compressor and ring. Branch 2 (after the
  // q_lora projection, whose output it reads): the indexer's query, then (after branch 3 and branch
  // 0's head weights) its top-k. Main: the query.
  Branch(0, [&] {
    if (w.has_idx) {
      Mark("compressors");
      Linear(w.idx_weights_proj, xn, D, n, wi, IH, xnq);  // its heads^-0.5 scale: in the scoring kernel
      Checkpoint(0);
    }
    Mark("attn_q_kv_proj");
    Linear(w.wkv, xn, D, n, kv, d, xnq);
    // The FP8 cache: rounded as the CPU's WindowFormat stores K=V rows (nope dims fp8 in blocks
    // of 64, RoPE dims bf16), in the same kernel.
    RmsNormRope(kv, n, 1, d, w.kv_norm, inv, Fp8Cache() ? 64 : 0, kv_packed, kv_ld);
    // With one row per sequence the append can precede the attention: row p goes to slot
    // p % cap, whose old entry p - cap (cap >= W) is outside the window p - W + 1 .. p - 1 the
    // attention reads from the ring (row p itself it reads from kv). Several rows per sequence
    // would overwrite entries their earlier rows still need: then it follows the attention.
    if (one_per_seq) RingAppend(kv_rows, kv_ld, st.window, n);
  });
  if (w.has_comp) {
    Branch(1, [&] {
      Mark("compressors");
      if (xns) {
        gpu::LaunchBf16Split(xn, D, n, D, xn_split, cur_stream());
        Checkpoint(1);
      }
      Compressor(w.comp, xn, n, proj, st.comp_rows, st.comp_entries, xnq, xns, false);
      RingAppend(proj, 2 * w.comp.width(), st.comp_rows, n);
    });
  }
  if (w.has_idx) {
    Branch(3, [&] {
      Mark("compressors");
      if (xns && w.has_comp) WaitCheckpoint(1, cur_stream());
      if (xns && !w.has_comp) gpu::LaunchBf16Split(xn, D, n, D, xn_split, cur_stream());
      Compressor(w.idx_comp, xn, n, iproj, st.index_rows, st.index_entries, xnq, xns, true);
      RingAppend(iproj, 2 * w.idx_comp.width(), st.index_rows, n);
    });
  }
  Mark("attn_q_kv_proj");
  Linear(w.wq_a, xn, D, n, cq, qlr, xnq);
  // Few rows: the q-lora RMSNorm also act_quant's cq for the FP8/FP4 query projections (the bits
  // their blocks would compute each from cq).
  gpu::QuantizedRows cqq;
  if (n <= kNormQuantRows && qlr % 4 == 0 &&
      (TakesQuantizedRows(w.wq_b) || (w.has_idx && TakesQuantizedRows(w.idx_wq_b)))) {
    cqq.q = cq_q; cqq.ldq = gpu::QuantizedLd(qlr); cqq.s = cq_s; cqq.lds = gpu::QuantizedScales(qlr);
  }
  RmsNorm(cq, qlr, cq, qlr, n, qlr, w.q_norm, cqq.q ? cq_q : nullptr, cq_s);
  if (w.has_idx) {
    Branch(2, [&] {
      Mark("compressors");
      Linear(w.idx_wq_b, cq, qlr, n, qi, IH * Id, cqq);  // its RoPE: in the scoring kernel
      if (Fp8Cache()) {  // or here, with the FP8 cache's Hadamard + FP4 rounding after it
        gpu::IndexQueryRoundParams qr;
        qr.q = qi;
        qr.n = n;
        qr.heads = static_cast<int>(IH);
        qr.head_dim = static_cast<int>(Id);
        qr.rope_dim = c.rope_head_dim;
        qr.inv_freq = inv_compress;
        qr.pos = Meta(n).pos;
        gpu::LaunchIndexQueryRound(qr, cur_stream());
      }
      WaitCheckpoint(0, cur_stream());                   // the head weights
      JoinIntoCurrent(3);                                // the index entries
      Mark("indexer_topk");
      gpu::IndexerTopKParams ip;
      ip.meta = Meta(n); ip.q = qi; ip.weights = wi; ip.keys = st.index_entries;
      ip.heads = static_cast<int>(IH); ip.head_dim = static_cast<int>(Id); ip.rate = w.rate;
      ip.topk = c.index_topk; ip.max_entries = static_cast<int>(st.index_entries.capacity);
      ip.weight_scale = 1.0f / std::sqrt(static_cast<float>(IH));
      ip.rope_dim = Fp8Cache() ? 0 : c.rope_head_dim;  // (the FP8 cache: applied above)
      ip.inv_freq = inv_compress;
      ip.key_format = IndexKeyFormat(c).codec();
      ip.sel = sel; ip.sel_count = sel_count; ip.scores = iscores; ip.score_rows = iscore_rows;
      // The FP8 cache's FP4 queries and keys: per-block dots (the CPU's fp4_blocks), on the tensor
      // cores where they fit (the same bits).
      ip.fp4_blocks = Fp8Cache();
      ip.tensor_core_min_rows = gpu::GetKernelOptions().indexer_tc_min_rows;
      if (!Fp8Cache() || !gpu::IndexerTensorCoresFit(ip)) ip.tensor_core_min_rows = 0;
      ip.longest_run = longest_chunk;  // (decode and verify steps: a row a block)
      gpu::LaunchIndexerTopK(ip, cur_stream());
    });
  }
  Mark("attn_q_kv_proj");
  // wq_b's per-head RMSNorm + RoPE: in the attention kernel.
  Linear(w.wq_b, cq, qlr, n, q, H * d, cqq);
  Join(0);
  if (w.has_comp) Join(1);
  if (w.has_idx) Join(2);  // it waited for branch 3
  Mark("attention");
  gpu::QuantizedRows oq;
  gpu::SparseAttentionParams ap = AttentionParams(w, st.window, n, inv, &oq);
  ap.comp = st.comp_entries;
  ap.sel = w.has_idx ? sel : nullptr;
  ap.sel_count = w.has_idx ? sel_count : nullptr;
  ap.rate = w.has_comp ? w.rate : 0;
  ap.q_norm_eps = static_cast<float>(c.rms_norm_eps);
  ap.kv_bf16 = Fp8Cache();  // K=V rounded to fp8 / bf16 values (RmsNormRope, the compressor)
  ap.qp_bf16 = Fp8Cache();  // and the official kernel's bf16 q and P (the CPU's AttendHeadBf16)
  ap.kv = kv_rows;
  ap.kv_format = kv_format;
  AttendAndProject(w, ap, oq, st.window, n, one_per_seq);
}

gpu::MoeCombineParams CudaModel::Impl::Moe(const BlockW& w, int layer, int64_t n) {
  const int64_t D = c.hidden_size;
  const int64_t E = w.moe_experts > 0 ? w.moe_experts : c.n_routed_experts;
  const int64_t K = w.moe_topk > 0 ? w.moe_topk : c.num_experts_per_tok;
  const int64_t I = c.moe_intermediate_size, P = n * K;
  const float lim = static_cast<float>(c.swiglu_limit);
  // Up to kMoeQuantRows rows (every decode batch, small prefill chunks): the FP8/FP4 expert
  // linears take their inputs quantized once per token (the normalized x on branch 0, beside the
  // gate and the route; the SwiGLU output before w2) instead of by each of their blocks: the same
  // bits.
  const bool prequant = n <= kMoeQuantRows && TakesQuantizedRows(w.experts.w1);
  const bool shared_first = prequant && n <= kXnQuantRows && w.has_shared;
  // The FP8-instruction mode: x's codes once for the shared and the routed experts.
  const gpu::QuantizedRows xc = XnCodes(MoeCodes(w), n);
  gpu::QuantizedRows xq;
  if (prequant) {
    Branch(0, [&] {
      Mark("moe_router+group");
      xq = gpu::LaunchActQuantRows(xn, D, n, D, xq_buf, xs_buf, cur_stream());
    });
    Checkpoint(0);
  }
  // The shared expert (branch 0) overlaps the routing (main) and, unless shared_first (then the
  // routed experts wait for its w1 + w3, and its w2 joins before the routed w2), the routed
  // experts.
  if (w.has_shared) {
    Branch(0, [&] {
      Mark("moe_shared+combine");
      gpu::LinearParams p;
      p.w = w.sh_w1; p.x = xn; p.ldx = D; p.m = n; p.y = sg; p.ldy = I; p.aq = Aq();
      if (prequant && TakesQuantizedRows(w.sh_w1)) p.xq = xq;
      if (w.sh_w1.mma) p.xq = xc;
      p.swiglu_to_aq = w.sh_w1.mma && w.sh_w2.mma;  // (W2 takes the codes: sg holds W1's output)
      const gpu::QuantizedRows sc = gpu::LaunchLinearSwiglu(p, w.sh_w3, su, lim, cur_stream());
      if (shared_first) Checkpoint(0);
      Linear(w.sh_w2, sg, I, n, sy, D, sc);
    });
  }
  Mark("moe_router+group");
  if (TcGate(w.gate)) {
    DSINFER_CHECK(n <= xn_split_rows);  // every forward's rows (max_tokens)
    // The warpgroup-MMA tile only when its 128 x 128 blocks fill about half the SMs: with E = 256
    // a decode batch of 32 - 128 rows would make 2 blocks; the 8-token tile (the same bits)
    // spreads those over 64 - 256.
    const gpu::Bf16TcTile tile =
        (E / 128) * ((n + 127) / 128) >= 64 ? gpu::Bf16TcTile::kAuto : gpu::Bf16TcTile::kFew;
    TcLinear(w.gate, xn, D, n, rlog, E, xn_split, false, tile);
  } else {
    Linear(w.gate, xn, D, n, rlog, E);
  }
  gpu::MoeRouteParams rp;
  rp.logits = rlog; rp.bias = w.gate_bias; rp.tid2eid = w.tid2eid; rp.ids = Meta(n).ids; rp.n = n;
  rp.E = static_cast<int>(E); rp.K = static_cast<int>(K);
  rp.scoring = c.scoring_func == "sqrtsoftplus" ? gpu::ScoringFunc::kSqrtSoftplus
             : c.scoring_func == "softmax"      ? gpu::ScoringFunc::kSoftmax
                                                : gpu::ScoringFunc::kSigmoid;
  rp.norm_topk_prob = w.moe_norm_topk >= 0 ? w.moe_norm_topk != 0 : c.norm_topk_prob;
  rp.routed_scaling_factor = static_cast<float>(c.routed_scaling_factor);
  rp.sel = rsel;
  rp.weight = rwt;
  gpu::MoeGroupParams gp;
  gp.sel = rsel; gp.pairs = P; gp.E = static_cast<int>(E); gp.counts = counts; gp.active = active;
  gp.num_active = num_active + layer; gp.offsets = offsets; gp.pair_list = pairs;
  gp.done = route_done;
  gpu::LaunchMoeRoute(rp, &gp, cur_stream());
  const ExpertsW& ex = w.experts;
  auto expert = [&](const WeightRef& shape, const void** data, const void** scale, const float* x,
                    int64_t ldx, int div, float* out, int64_t ldy) {
    gpu::ExpertLinearParams p;
    p.shape = shape; p.data = data; p.scale = scale; p.x = x; p.ldx = ldx; p.x_row_div = div;
    p.y = out; p.ldy = ldy; p.active = active; p.num_active = num_active + layer; p.offsets = offsets;
    p.pairs = pairs; p.max_slots = static_cast<int>(std::min(E, P)); p.total_pairs = P; p.aq = Aq();
    return p;
  };
  Mark("moe_routed_experts");
  if (ep_rank.comm != nullptr) {
    // Expert parallelism: the routed experts through the group (after branch 0's read of xn,
    // which a later layer rewrites).
    if (prequant) WaitCheckpoint(0);
    ExchangeExperts(w, layer, n);
    if (shared_first) Join(0);
  } else {
    if (prequant) WaitCheckpoint(0);  // the quantized x (shared_first: the shared w1 + w3 too)
    // The FP8-instruction mode: the SwiGLU's output goes to W2 as act_quant codes in the stream's
    // scratch, never as fp32 rows (g then holds W1's output).
    gpu::QuantizedRows gc;
    {
      gpu::ExpertLinearParams p =
          expert(ex.w1, ex.w1_data, ex.w1_scale, xn, D, static_cast<int>(K), g, I);
      if (prequant) p.xq = xq;
      if (ex.w1.mma) p.xq = xc;
      p.swiglu_to_aq = ex.w1.mma && ex.w2.mma;
      gc = gpu::LaunchExpertLinearSwiglu(p, ex.w3_data, ex.w3_scale, gu, lim, cur_stream());
    }
    {
      gpu::ExpertLinearParams p = expert(ex.w2, ex.w2_data, ex.w2_scale, g, I, 1, ys, D);
      if (shared_first) Join(0);
      if (prequant) p.xq = gpu::LaunchActQuantRows(g, I, P, I, gq_buf, gs_buf, cur_stream());
      if (gc.c != nullptr) p.xq = gc;
      gpu::LaunchExpertLinear(p, cur_stream());
    }
  }
  Mark("moe_shared+combine");
  if (w.has_shared && !shared_first) Join(0);
  // The combine itself runs inside the mHC post kernel that follows (HcPost).
  gpu::MoeCombineParams cp;
  cp.y = ys; cp.sel = rsel; cp.weight = rwt; cp.shared = w.has_shared ? sy : nullptr; cp.out = y;
  cp.n = n; cp.K = static_cast<int>(K); cp.D = D;
  return cp;
}

void CudaModel::Impl::AllocateActivations() {
  const int64_t T = opt.max_tokens, D = c.hidden_size, hc = c.hc_mult, H = c.num_heads;
  const int64_t d = c.head_dim;
  int64_t E = c.n_routed_experts, K = c.num_experts_per_tok;
  if (v41 && v41->ds) {  // the DSpark stages' MoE runs in the same buffers
    E = std::max<int64_t>(E, v41->c.dspark_n_routed_experts);
    K = std::max<int64_t>(K, v41->c.dspark_num_experts_per_tok);
  }
  const int64_t I = c.moe_intermediate_size, IH = c.index_n_heads, Id = c.index_head_dim;
  X = Alloc<float>(T * hc * D);
  mix = Alloc<float>(
      std::max<int64_t>(T, opt.max_seqs) *
      std::max(gpu::HcMixSlices(hc * D), gpu::HcPostMixSlices(static_cast<int>(hc), D)) *
      ((2 + hc) * hc + 1));
  post = Alloc<float>(T * hc);
  comb = Alloc<float>(T * hc * hc);
  xn = Alloc<float>(T * D);
  cq = Alloc<float>(T * c.q_lora_rank);
  q = Alloc<float>(T * H * d);
  kv = Alloc<float>(T * d);
  if (v41 == nullptr && WindowFormat(c).packed())
    kv_packed = Alloc<float>(T * WindowFormat(c).row_floats());
  proj = Alloc<float>(T * 4 * d);
  iproj = Alloc<float>(T * 4 * Id);
  qi = Alloc<float>(T * IH * Id);
  wi = Alloc<float>(T * IH);
  o = Alloc<float>(T * H * d);
  if (opt.fp8_mma) {  // XnCodes
    xn_c = Alloc<uint8_t>(gpu::MmaQuantBytes(T, D));
    xn_cs = Alloc<float>(gpu::MmaScaleCount(T, D));
  }
  z = Alloc<float>(T * c.o_groups * c.o_lora_rank);
  y = Alloc<float>(T * D);
  // (The FP8-instruction mode quantizes every linear's input into it, as e4m3 codes with their
  // scales transposed, and splits small launches by k slice into `part`.)
  if (T > 16 ||
      opt.fp8_mma) {  // FP8/FP4 linears of more than 16 rows quantize their input once, into this
    // The main stream's linears read up to H·d columns (wo_a) and the routed w2 T·K rows; the
    // branches' (kv / compressor / indexer / shared expert) at most max(D, I, q_lora_rank)
    // columns of T rows. A linear that does not fit its stream's scratch quantizes in the kernel
    // (the same bits).
    auto alloc = [&](gpu::ActQuantScratch& a, int64_t rows, int64_t width, int64_t rows2,
                     int64_t width2) {
      int64_t bytes =
          2 * std::max(rows * ((width + 15) / 16 * 16), rows2 * ((width2 + 15) / 16 * 16));
      // (rows rounded up to a 128-token tile: the tiled GEMM's transposed scales.)
      int64_t scales = std::max((rows + 127) / 128 * 128 * ((width + 127) / 128),
                                rows2 * ((width2 + 127) / 128));
      if (opt.fp8_mma) {
        bytes =
            std::max({bytes, gpu::MmaQuantBytes(rows, width), gpu::MmaQuantBytes(rows2, width2)});
        scales =
            std::max({scales, gpu::MmaScaleCount(rows, width), gpu::MmaScaleCount(rows2, width2)});
        if (rows2 > 0) {  // the main stream's routed experts: w1 / w3 over x, w2 over the pairs
          const int64_t slots = std::min(E, rows2);
          bytes = std::max({bytes, gpu::MmaExpertQuantBytes(rows, rows2, slots, D),
                            gpu::MmaExpertQuantBytes(rows2, rows2, slots, width2)});
          scales = std::max({scales, gpu::MmaExpertScaleCount(rows, rows2, slots, D),
                             gpu::MmaExpertScaleCount(rows2, rows2, slots, width2)});
        }
        a.part_count = int64_t{4} << 20;  // 16 MB: decode-sized launches' slice partials
        a.part = Alloc<float>(a.part_count);
      }
      a.q = Alloc<uint8_t>(bytes);
      a.q_bytes = bytes;
      a.s = Alloc<float>(scales);
      a.s_count = scales;
    };
    const int64_t qlr = c.q_lora_rank;
    alloc(aq_scratch[0], T, std::max({H * d, int64_t{c.o_groups} * c.o_lora_rank, D, I, qlr}),
          T * K, I);
    for (int b = 1; b <= kBranches; ++b) alloc(aq_scratch[b], T, std::max({D, I, qlr}), 0, 0);
  }
  sel = Alloc<int32_t>(T * std::max(c.index_topk, 1));
  sel_count = Alloc<int32_t>(T);
  {
    int64_t icap = 0;
    for (int l = 0; l < c.num_layers; ++l) icap = std::max(icap, IndexCapacity(l));
    // Score rows per indexer launch: all tokens, or as many as 16M scores (64 MB) allow.
    iscore_rows = std::max<int64_t>(1, std::min<int64_t>(T, (int64_t{16} << 20) / std::max<int64_t>(icap, 1)));
    iscores = Alloc<float>(iscore_rows * std::max<int64_t>(icap, 1));
  }
  rlog = Alloc<float>(T * E);
  rwt = Alloc<float>(T * K);
  rsel = Alloc<int32_t>(T * K);
  counts = Alloc<int32_t>(E);
  route_done = Alloc<int32_t>(1);
  gpu::Memset(route_done, 0, 4, stream.get());
  active = Alloc<int32_t>(E);
  num_active = Alloc<int32_t>(c.num_layers + 1);  // the MTP layer's last
  offsets = Alloc<int32_t>(E + 1);
  pairs = Alloc<int32_t>(T * K);
  g = Alloc<float>(T * K * I);
  {
    const int64_t R = std::min(T, kNormQuantRows);
    cq_q = Alloc<uint16_t>(R * gpu::QuantizedLd(c.q_lora_rank));
    cq_s = Alloc<float>(R * gpu::QuantizedScales(c.q_lora_rank));
  }
  {
    const int64_t R = std::min(T, kAttnOutQuantRows), HD = c.num_heads * c.head_dim;
    o_q = Alloc<uint16_t>(R * gpu::QuantizedLd(HD));
    o_s = Alloc<float>(R * gpu::QuantizedScales(HD));
  }
  if (gpu::GetKernelOptions().AttentionTcFor(Fp8Cache()))
    attn_split = Alloc<float>(kAttnSplitFloats);
  if (gpu::GetKernelOptions().attention_row_prepass && Fp8Cache()) {
    row_keys_elems = 2 * T * d;
    row_keys = Alloc<uint16_t>(row_keys_elems);
  }
  {
    const int64_t R = std::min(T, std::max(kMoeQuantRows, kXnQuantRows));
    xq_buf = Alloc<uint16_t>(R * gpu::QuantizedLd(D));
    xs_buf = Alloc<float>(R * gpu::QuantizedScales(D));
    gq_buf = Alloc<uint16_t>(R * K * gpu::QuantizedLd(I));
    gs_buf = Alloc<float>(R * K * gpu::QuantizedScales(I));
  }
  gu = Alloc<float>(T * K * I);
  ys = Alloc<float>(T * K * D);
  sg = Alloc<float>(T * I);
  su = Alloc<float>(T * I);
  sy = Alloc<float>(T * D);
  logits_rows = opt.all_logits ? T
                               : std::min(T, std::max<int64_t>(opt.max_seqs, 1) *
                                                 std::max<int64_t>(opt.logits_per_seq, 1));
  xs = Alloc<float>(logits_rows * hc * D);
  hz = Alloc<float>(logits_rows * D);
  logits = Alloc<float>(logits_rows * c.vocab_size);
  if (TcHead()) {
    const int64_t head_rows = std::max(logits_rows, std::max<int64_t>(opt.max_seqs, 1));
    head_split = Alloc<uint16_t>(gpu::Bf16SplitElements(head_rows, D));
  }
  {  // xn's split rows, when some compressor projection or router gate takes the tensor cores.
    // One buffer for both: the compressors' branches read it between the attention's norm and
    // their join before the attention; the gate writes and reads it after, on the main stream,
    // before the next layer forks those branches again.
    bool any = has_mtp && (HasTcCompressor(mtp.block) || TcGateWeight(mtp.block.gate));
    for (const BlockW& b : layers) any = any || HasTcCompressor(b) || TcGateWeight(b.gate);
    if (v41) {
      for (const V41LayerW& x : v41->layers)
        any = any || (x.kv_source && TcBf16(V41CompressorMatrix(x)));
      if (v41->ds)
        for (const BlockW& st : v41->ds->stages) any = any || TcGateWeight(st.gate);
    }
    if (any) {
      xn_split = Alloc<uint16_t>(gpu::Bf16SplitElements(T, D));
      xn_split_rows = T;
    }
  }
  meta_dev = Alloc<int32_t>(kMetaArrays * T);
  meta_host = gpu::PinnedBuffer(kMetaArrays * T * sizeof(int32_t));
  sampled_dev = Alloc<int32_t>(T);
  sampled_host = gpu::PinnedBuffer(T * sizeof(int32_t));
  for (int l = 0; l < c.num_layers; ++l) {
    if (IndexCapacity(l) > 0) {
      gpu::PrepareIndexerTopK(c.index_n_heads, c.index_head_dim,
                              static_cast<int>(IndexCapacity(l)));
    }
  }
  if (MtpOn()) {
    const int64_t S = std::max<int64_t>(opt.max_seqs, 1);
    mtp_X = Alloc<float>(T * hc * D);
    mtp_hin = Alloc<float>(T * hc * D);
    mtp_e = Alloc<float>(T * D);
    mtp_ep = Alloc<float>(T * D);
    mtp_xs = Alloc<float>(S * hc * D);
    mtp_hz = Alloc<float>(S * D);
    mtp_logits = Alloc<float>(S * c.vocab_size);
    // A step's MTP rows, or a DraftMtp chain's levels (up to kMaxRollback) of up to S rows.
    const int64_t meta_rows = std::max(T, S * CudaModel::kMaxRollback);
    mtp_meta_dev = Alloc<int32_t>(kMtpMetaArrays * meta_rows);
    mtp_meta_host = gpu::PinnedBuffer(kMtpMetaArrays * meta_rows * sizeof(int32_t));
    mtp_ids_dev = Alloc<int32_t>(S * CudaModel::kMaxRollback);
    mtp_ids_host = gpu::PinnedBuffer(S * CudaModel::kMaxRollback * sizeof(int32_t));
  }
  RopeTables rope = RopeTables::Build(c);
  inv_main = UploadF32(rope.main);
  inv_compress = UploadF32(rope.compress);
}

CudaModel::CudaModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaModel::~CudaModel() = default;

const io::DeepseekV4Config& CudaModel::config() const { return impl_->c; }

const io::DeepseekV41Config* CudaModel::v41_config() const {
  return impl_->v41 ? &impl_->v41->c : nullptr;
}

model::ModelInfo CudaModel::info() const {
  return impl_->v41 ? deepseek_v41::InfoOf(impl_->v41->c)
                    : InfoFromConfig(io::ModelFamily::kDeepseekV4, impl_->c);
}

StatusOr<int> CudaModel::NewSequence() {
  if (impl_->opt.paged) return Internal("a paged CUDA model has no slots of its own");
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

void CudaModel::CopySequence(int from, int to) {
  Impl& m = *impl_;
  DSINFER_CHECK(!m.opt.paged);
  DSINFER_CHECK(from >= 0 && from < m.opt.max_seqs && m.used[from]);
  DSINFER_CHECK(to >= 0 && to < m.opt.max_seqs && m.used[to] && to != from);
  for (const Impl::Pool& pool : m.pools) {
    const int64_t span = pool.per_seq * pool.page_floats();
    gpu::CopyDeviceToDevice(pool.data + to * span, pool.data + from * span,
                            static_cast<size_t>(span) * sizeof(float), m.stream.get());
  }
  m.lengths[to] = m.lengths[from];
}

int64_t CudaModel::length(int slot) const { return impl_->lengths[slot]; }

Status CudaModel::Rollback(int slot, int64_t length) {
  Impl& m = *impl_;
  if (m.opt.paged || slot < 0 || slot >= m.opt.max_seqs || !m.used[slot]) {
    return InvalidArgument("Rollback: bad CUDA state slot");
  }
  if (length < 0 || length > m.lengths[slot] || m.lengths[slot] - length > kMaxRollback) {
    return OutOfRange("rollback from " + std::to_string(m.lengths[slot]) + " to " +
                      std::to_string(length) + " exceeds the slack of " +
                      std::to_string(kMaxRollback));
  }
  m.lengths[slot] = length;
  return Status::Ok();
}

int64_t CudaModel::Impl::FillMeta(const std::vector<StepSeq>& seqs, LogitsRows rows) {
  int64_t T = 0;  // the step's rows: each array's length (Meta)
  for (const StepSeq& sq : seqs) T += static_cast<int64_t>(sq.ids->size());
  int32_t* h = meta_host.as<int32_t>();
  int64_t r = 0, nrows = 0;
  longest_chunk = 0;
  for (const StepSeq& sq : seqs) {
    const int64_t begin = r, start = sq.start, count = static_cast<int64_t>(sq.ids->size());
    longest_chunk = std::max(longest_chunk, count);
    for (int64_t i = 0; i < count; ++i, ++r) {
      const MetaRow m{h, T, r};
      m.Set((*sq.ids)[i], start + i, sq.row, begin, start, count);
      m.Feed(i + 1 == count ? sq.feed : -1);
    }
    const int64_t tail = HeadRows(sq, rows);
    for (int64_t i = count - tail; i < count; ++i)
      h[6 * T + nrows++] = static_cast<int32_t>(begin + i);
  }
  // A decode graph gathers n head rows whatever this step's count (a one-token chunk that draws
  // nothing has none): the rest name row 0, whose extra logits rows nothing reads.
  for (int64_t i = nrows; i < T; ++i) h[6 * T + i] = 0;
  return nrows;
}

int64_t CudaModel::Impl::HeadRows(const StepSeq& sq, LogitsRows rows) {
  const auto count = static_cast<int64_t>(sq.ids->size());
  switch (rows) {
    case LogitsRows::kAll:
      return count;
    case LogitsRows::kLast:
      return count > 0 ? 1 : 0;
    case LogitsRows::kTail:
      return std::clamp<int64_t>(sq.tail, 0, count);
  }
  return 0;
}

void CudaModel::Impl::Upload(int64_t table_rows, int64_t n, int64_t n_mtp) {
  if (table_rows > 0) {
    gpu::CopyToDevice(table_dev, table_host.get(),
                      static_cast<size_t>(table_rows * table_cols) * sizeof(int32_t), stream.get());
  }
  meta_from_zero_dev = nullptr;
  if (n > 0) {
    gpu::CopyToDevice(meta_dev, meta_host.get(), kMetaArrays * n * sizeof(int32_t), stream.get());
    // Whether every row's sequence starts at position 0 (seg_start, array 4 of n: Meta(n)).
    const int32_t* seg_start = meta_host.as<int32_t>() + 4 * n;
    if (std::all_of(seg_start, seg_start + n, [](int32_t s) { return s == 0; }))
      meta_from_zero_dev = meta_dev;
  }
  if (n_mtp > 0) {
    gpu::CopyToDevice(mtp_meta_dev, mtp_meta_host.get(), kMtpMetaArrays * n_mtp * sizeof(int32_t),
                      stream.get());
  }
}

int64_t CudaModel::Impl::FillMtpMeta(const std::vector<StepSeq>& seqs) {
  int64_t T = 0;
  for (const StepSeq& sq : seqs) {
    const auto count = static_cast<int64_t>(sq.ids->size());
    T += sq.start == 0 ? std::max<int64_t>(count - 1, 0) : count;
  }
  int32_t* h = mtp_meta_host.as<int32_t>();
  int64_t r = 0, main_row = 0;
  for (const StepSeq& sq : seqs) {
    const auto count = static_cast<int64_t>(sq.ids->size());
    const int64_t first = sq.start == 0 ? 1 : 0;  // position 0 has no streams before it
    const int64_t begin = r, rows = count - first, start = sq.start - 1 + first;
    for (int64_t j = first; j < count; ++j, ++r) {
      const MetaRow m{h, T, r};
      m.Set((*sq.ids)[j], sq.start - 1 + j, sq.row, begin, start, rows);
      m.HeadRow(r);
      m.Feed(j + 1 == count ? sq.feed : -1);
      // Row j pairs token j with the streams of the row before it: the ring's, for the first.
      m.StreamsSource(j == 0 ? -1 : main_row + j - 1);
    }
    main_row += count;
  }
  return T;
}

void CudaModel::Impl::Launch(int64_t n, int64_t nrows, bool one_per_seq, int64_t table_rows) {
  Upload(table_rows, n);
  Mark("embed");
  Run(n, nrows, one_per_seq);
}

int64_t CudaModel::Impl::EnqueueStep(const std::vector<StepSeq>& seqs, LogitsRows rows) {
  const int64_t nrows = FillMeta(seqs, rows);
  int64_t n = 0;
  for (const StepSeq& sq : seqs) n += static_cast<int64_t>(sq.ids->size());
  const bool one_per_seq =
      std::all_of(seqs.begin(), seqs.end(), [](const StepSeq& sq) { return sq.ids->size() <= 1; });
  Launch(n, nrows, one_per_seq, opt.paged ? static_cast<int64_t>(seqs.size()) : 0);
  return nrows;
}

Status CudaModel::Impl::CheckStep(const std::vector<StepSeq>& seqs, LogitsRows rows) const {
  const Impl& m = *this;
  int64_t n = 0, nrows = 0;
  for (const StepSeq& sq : seqs) {
    const size_t checked = sq.ids->size() - (sq.feed >= 0 && !sq.ids->empty() ? 1 : 0);
    for (size_t i = 0; i < checked; ++i) {
      const int32_t id = (*sq.ids)[i];
      if (id < 0 || id >= m.c.vocab_size) {
        return InvalidArgument("token id " + std::to_string(id) +
                               " is outside the vocabulary [0, " + std::to_string(m.c.vocab_size) +
                               ")");
      }
      if (m.v41 && m.v41->c.has_vision && id == m.v41->c.image_token_id) {
        return InvalidArgument("image inputs are not supported: token id " + std::to_string(id) +
                               " is the image token and the DeepSeek-V4.1 vision tower is not "
                               "built");
      }
    }
    n += static_cast<int64_t>(sq.ids->size());
    nrows += HeadRows(sq, rows);
  }
  if (n > m.opt.max_tokens) {
    return OutOfRange("forward of " + std::to_string(n) + " rows exceeds max_tokens " +
                      std::to_string(m.opt.max_tokens));
  }
  if (nrows > m.logits_rows)
    return OutOfRange("more logits rows than the CUDA model was sized for");
  return Status::Ok();
}

namespace {

// A slot-mode forward's chunks as steps, or why they cannot run.
Status SlotSteps(const CudaModel::Impl& m, const std::vector<CudaModel::Chunk>& chunks,
                 LogitsRows rows, std::vector<CudaModel::Impl::StepSeq>* seqs) {
  if (m.opt.paged) return Internal("a paged CUDA model runs ForwardPaged");
  if (m.ep_holds && m.ep_rank.comm == nullptr) {
    return InvalidArgument(
        "a model loaded with an expert filter runs in its group (SetExpertParallel)");
  }
  std::vector<int> seen;
  for (const auto& ch : chunks) {
    if (ch.slot < 0 || ch.slot >= m.opt.max_seqs || !m.used[ch.slot])
      return InvalidArgument("bad CUDA state slot");
    if (std::find(seen.begin(), seen.end(), ch.slot) != seen.end()) {
      return InvalidArgument("a request appears twice in one forward batch");
    }
    seen.push_back(ch.slot);
    if (m.lengths[ch.slot] + static_cast<int64_t>(ch.ids.size()) > m.opt.max_len) {
      return OutOfRange("sequence exceeds the CUDA state capacity of " +
                        std::to_string(m.opt.max_len));
    }
    seqs->push_back({ch.slot, m.lengths[ch.slot], &ch.ids});
  }
  return m.CheckStep(*seqs, rows);
}

}  // namespace

Status CudaModel::CheckForward(const std::vector<Chunk>& chunks, LogitsRows rows) const {
  std::vector<Impl::StepSeq> seqs;
  return SlotSteps(*impl_, chunks, rows, &seqs);
}

StatusOr<CudaModel::DeviceLogits> CudaModel::ForwardToDevice(const std::vector<Chunk>& chunks,
                                                             LogitsRows rows) {
  Impl& m = *impl_;
  std::vector<Impl::StepSeq> seqs;
  if (Status st = SlotSteps(m, chunks, rows, &seqs); !st.ok()) {
    if (m.ep_rank.comm != nullptr) m.ep_rank.comm->Abort(st);  // no rank waits for this one
    return st;
  }
  m.ep_status = Status::Ok();
  const int64_t nrows = m.EnqueueStep(seqs, rows);
  // Expert parallelism: a failed exchange fails the forward (the slots' state is part-advanced).
  if (!m.ep_status.ok()) return std::exchange(m.ep_status, Status::Ok());
  for (const auto& ch : chunks) m.lengths[ch.slot] += static_cast<int64_t>(ch.ids.size());
  return DeviceLogits{m.logits, nrows};
}

StatusOr<std::vector<float>> CudaModel::Forward(const std::vector<Chunk>& chunks, LogitsRows rows) {
  Impl& m = *impl_;
  DSINFER_ASSIGN_OR_RETURN(const DeviceLogits logits, ForwardToDevice(chunks, rows));
  std::vector<float> out(static_cast<size_t>(logits.rows * m.c.vocab_size));
  if (out.empty()) return out;
  gpu::CopyToHost(out.data(), logits.data, out.size() * 4, m.stream.get());
  m.stream.Synchronize();
  return out;
}

gpu::StreamHandle CudaModel::stream() const { return impl_->stream.get(); }

StatusOr<std::vector<int32_t>> CudaModel::DecodeStep(const std::vector<int>& slots,
                                                     const std::vector<int32_t>& ids, bool use_graph) {
  Impl& m = *impl_;
  const int64_t n = static_cast<int64_t>(slots.size()), T = m.opt.max_tokens;
  if (m.opt.paged) return Internal("DecodeStep runs on the model's own slots");
  if (m.ep_holds) {
    const Status st =
        Unimplemented("expert parallelism: run Forward (a decode step's graph has no exchange)");
    if (m.ep_rank.comm != nullptr) m.ep_rank.comm->Abort(st);  // no rank waits for this one
    return st;
  }
  if (ids.size() != slots.size()) return InvalidArgument("DecodeStep: slots and ids differ in size");
  if (n == 0) return std::vector<int32_t>{};
  if (n > T || n > m.logits_rows) return OutOfRange("DecodeStep batch exceeds the CUDA buffers");
  std::vector<std::vector<int32_t>> one(n);
  std::vector<Impl::StepSeq> seqs;
  for (int64_t i = 0; i < n; ++i) {
    const int s = slots[i];
    if (s < 0 || s >= m.opt.max_seqs || !m.used[s]) return InvalidArgument("bad CUDA state slot");
    if (ids[i] < 0 || ids[i] >= m.c.vocab_size) return InvalidArgument("token id outside the vocabulary");
    if (m.lengths[s] + 1 > m.opt.max_len) return OutOfRange("sequence exceeds the CUDA state capacity");
    one[i] = {ids[i]};
    seqs.push_back({s, m.lengths[s], &one[i]});
  }
  m.FillMeta(seqs, LogitsRows::kLast);
  auto step = [&] {
    m.Launch(n, n, true, 0);
    m.Mark("sample");
    gpu::SampleRowsParams sp;  // greedy: every row's argmax
    sp.logits = m.logits;
    sp.num_rows = n;
    sp.vocab = m.c.vocab_size;
    sp.out_id = m.sampled_dev;
    gpu::LaunchSampleRows(sp, m.stream.get());
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

std::vector<std::pair<std::string, double>> CudaModel::ProfileForward(
    const std::vector<Chunk>& chunks) {
  gpu::EventLog log;
  impl_->profile = &log;
  auto r = ForwardToDevice(chunks, LogitsRows::kLast);
  impl_->Mark("end");
  impl_->stream.Synchronize();
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

void CudaModel::Impl::MtpChain(int64_t T, int levels) {
  for (int l = 0; l < levels; ++l) {
    int32_t* meta = mtp_meta_dev + l * kMtpMetaArrays * T;
    MtpGather(T, mtp_X, meta, l == 0 ? nullptr : mtp_ids_dev + (l - 1) * T);
    MtpRun(T, true, true, meta);
    gpu::SampleRowsParams sp;  // greedy: every row's argmax
    sp.logits = mtp_logits;
    sp.num_rows = T;
    sp.vocab = c.vocab_size;
    sp.out_id = mtp_ids_dev + l * T;
    gpu::LaunchSampleRows(sp, stream.get());
  }
  gpu::CopyToHost(mtp_ids_host.get(), mtp_ids_dev, levels * T * sizeof(int32_t), stream.get());
}

gpu::Graph& CudaModel::Impl::MtpChainGraph(int64_t T, int levels) {
  auto& graph = mtp_graphs[{T, levels}];
  if (!graph) {
    graph = std::make_unique<gpu::Graph>();
    graph->BeginCapture(stream.get());
    MtpChain(T, levels);
    graph->EndCapture(stream.get());
  }
  return *graph;
}

void CudaModel::Impl::ReplayMtpChain(int64_t T, int levels) {
  if (opt.graphs) {
    MtpChainGraph(T, levels).Launch(stream.get());
  } else {
    MtpChain(T, levels);
  }
}

bool CudaModel::has_mtp() const { return impl_->MtpOn(); }

StatusOr<std::vector<std::vector<int32_t>>> CudaModel::DraftMtp(
    const std::vector<MtpDraft>& drafts) {
  Impl& m = *impl_;
  if (!m.MtpOn() || m.pools.empty()) {
    return Internal("DraftMtp needs a paged CUDA model with its MTP layer (UsePagedState)");
  }
  const int64_t S = static_cast<int64_t>(drafts.size());
  if (S > m.opt.max_seqs || S > m.opt.max_tokens) {
    return OutOfRange(std::to_string(S) + " sequences to draft for; the CUDA model holds " +
                      std::to_string(std::min<int64_t>(m.opt.max_seqs, m.opt.max_tokens)));
  }
  std::vector<std::vector<int32_t>> out(drafts.size());
  if (S == 0) return out;
  for (int64_t i = 0; i < S; ++i) {
    const MtpDraft& d = drafts[i];
    if (d.length < 1 || d.count < 1 || d.count > kMaxRollback ||
        d.length - 1 + d.count > m.opt.max_len) {
      return InvalidArgument("DraftMtp: a draft needs length >= 1, 1 <= count <= " +
                             std::to_string(kMaxRollback) + " and room");
    }
    if (d.next_token < 0 || d.next_token >= m.c.vocab_size) {
      return InvalidArgument("DraftMtp: token id " + std::to_string(d.next_token) +
                             " is outside the vocabulary");
    }
  }
  m.uploaded.Synchronize();  // the host buffers are refilled below
  for (int64_t i = 0; i < S; ++i) {
    DSINFER_RETURN_IF_ERROR(m.FillTableRow(i, drafts[i].pages, drafts[i].length));
  }
  // Level 0: every sequence's row at length - 1 (its kept streams, the drawn token); level l:
  // the sequences that want more, their row at length - 1 + l on the last level's streams and
  // draft. The levels every active sequence still wants chain on the device (each level's
  // tokens fed from the last one's argmax) with one host wait; then the longer ones go on.
  std::vector<int64_t> active(static_cast<size_t>(S)), prev_row(static_cast<size_t>(S), -1);
  for (int64_t i = 0; i < S; ++i) active[i] = i;
  for (int level = 0; !active.empty();) {
    const auto T = static_cast<int64_t>(active.size());
    int levels = kMaxRollback;
    for (int64_t i : active) levels = std::min(levels, drafts[i].count - level);
    // Level l's metadata at l * kMtpMetaArrays * T; its ids at mtp_ids_dev + l * T.
    for (int l = 0; l < levels; ++l) {
      int32_t* h = m.mtp_meta_host.as<int32_t>() + l * kMtpMetaArrays * T;
      for (int64_t r = 0; r < T; ++r) {
        const int64_t i = active[r];
        const int64_t pos = drafts[i].length - 1 + level + l;
        const MetaRow mr{h, T, r};
        mr.Set(level + l == 0 ? drafts[i].next_token : (l == 0 ? out[i].back() : 0), pos, i, r, pos,
               1);
        mr.HeadRow(r);
        mr.Feed(l == 0 ? -1 : r);  // the last level's draft
        mr.StreamsSource(l == 0 ? prev_row[i] : r);
      }
    }
    if (level == 0) {
      gpu::CopyToDevice(m.table_dev, m.table_host.get(),
                        static_cast<size_t>(S * m.table_cols) * sizeof(int32_t), m.stream.get());
    }
    gpu::CopyToDevice(m.mtp_meta_dev, m.mtp_meta_host.get(),
                      static_cast<size_t>(levels * kMtpMetaArrays * T) * sizeof(int32_t),
                      m.stream.get());
    m.ReplayMtpChain(T, levels);
    m.stream.Synchronize();
    std::vector<int64_t> next;
    for (int64_t r = 0; r < T; ++r) {
      const int64_t i = active[r];
      for (int l = 0; l < levels; ++l) out[i].push_back(m.mtp_ids_host.as<int32_t>()[l * T + r]);
      if (static_cast<int>(out[i].size()) < drafts[i].count) {
        prev_row[i] = r;
        next.push_back(i);
      }
    }
    active = std::move(next);
    level += levels;
  }
  m.uploaded.Record(m.stream.get());
  return out;
}

std::vector<float> CudaModel::LastDecodeLogits(int rows) {
  const int64_t V = impl_->c.vocab_size;
  std::vector<float> v(static_cast<size_t>(std::max(0, rows) * V));
  gpu::CopyToHost(v.data(), impl_->logits, v.size() * 4, impl_->stream.get());
  impl_->stream.Synchronize();
  return v;
}

std::vector<int> CudaModel::LastActiveExperts() {
  std::vector<int> v(impl_->c.num_layers);
  gpu::CopyToHost(v.data(), impl_->num_active, v.size() * 4, impl_->stream.get());
  impl_->stream.Synchronize();
  return v;
}

}  // namespace dsinfer::model::deepseek_v4::cuda
