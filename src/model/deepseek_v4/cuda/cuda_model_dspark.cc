// DeepSeek-V4.1's DSpark drafter on the CUDA executor (CudaModelOptions::dspark;
// docs/architecture.md "DSpark"). The CPU model is the reference (model/deepseek_v41/model.cc: the
// taps in Block; dspark.cc: WriteDraftContext, DraftDSpark):
// * every forward taps the mean of the streams entering each target layer (after its Engram
//   lookup), and after the layers writes per stage fp8_sim(RoPE(kv_norm(wkv(main_norm(main_proj(
//   taps)))))) of each row into the stage's context ring (a ring of the state layout, by position:
//   rollbacks, forks, the prefix cache and preemption carry it as any ring). Inside the decode
//   graphs too: the buffers are fixed and the rows come from the uploaded metadata.
// * a draft runs the block [anchor, noise x (B - 1)] at positions L .. L + B - 1 of every request
//   through the stages (single-pass mHC, the attention over the last W context rows gathered from
//   the ring and the whole block, the stage's MoE of its own sizes), the head (the collapse with
//   the last site's pre, the norm, the trunk's head), then slot by slot the Markov step.
#include "model/deepseek_v4/cuda/cuda_model_impl.h"

namespace dsinfer::model::deepseek_v4::cuda {

void CudaModel::Impl::DSparkTap(int layer, int64_t n) {
  DSparkParts& ds = *v41->ds;
  const int j = ds.TapOf(v41->c, layer);
  if (j < 0) return;
  const int64_t D = c.hidden_size;
  const auto taps = static_cast<int64_t>(v41->c.dspark_target_layer_ids.size());
  Mark("dspark");
  gpu::StreamMeanParams p;
  p.x = X;
  p.n = n;
  p.hc = c.hc_mult;
  p.dim = D;
  p.out = ds.taps + j * D;
  p.ld = taps * D;
  gpu::LaunchStreamMean(p, cur_stream());
}

void CudaModel::Impl::DSparkContext(int64_t n) {
  DSparkParts& ds = *v41->ds;
  const int64_t D = c.hidden_size, d = c.head_dim;
  const auto taps = static_cast<int64_t>(v41->c.dspark_target_layer_ids.size());
  Mark("dspark");
  Linear(ds.main_proj, ds.taps, taps * D, n, ds.main_x, D);
  RmsNorm(ds.main_x, D, ds.main_x, D, n, D, ds.main_norm);
  for (size_t s = 0; s < ds.stages.size(); ++s) {
    const BlockW& w = ds.stages[s];
    Linear(w.wkv, ds.main_x, D, n, ds.ctx_kv, d);
    RmsNormRope(ds.ctx_kv, n, 1, d, w.kv_norm, inv_main);
    gpu::LaunchFakeQuantRows(ds.ctx_kv, n, d, d, gpu::FakeQuant::kFp8Pow2, 32, cur_stream());
    RingAppend(ds.ctx_kv, d, ds.rings[s], n);  // the newest ring-capacity rows of each sequence
  }
}

void CudaModel::Impl::DSparkDraft(int64_t R) {
  V41Parts& v = *v41;
  DSparkParts& ds = *v.ds;
  const io::DeepseekV41Config& vc = v.c;
  const int64_t B = vc.dspark_block_size, n = R * B, D = c.hidden_size, hc = c.hc_mult;
  const int64_t H = c.num_heads, d = c.head_dim, qlr = c.q_lora_rank, V = c.vocab_size;
  const int64_t W = c.sliding_window, G = c.o_groups, olr = c.o_lora_rank;
  const auto S = static_cast<int>(ds.stages.size());
  Mark("dspark");
  Embed(X, n, static_cast<int>(hc));  // the block on every stream
  mix_ready = false;
  for (int s = 0; s < S; ++s) {
    const BlockW& w = ds.stages[static_cast<size_t>(s)];
    // The attention collapses with the previous site's pre (stage 0: stream 0).
    HcPre(w.hc_attn, n, w.attn_norm, false, 0, s == 0 ? v.pre_first : v.pre_mix, v.pre_attn);
    Linear(w.wkv, xn, D, n, kv, d);  // the block's K=V: RMSNorm + RoPE, on the FP8 grid
    RmsNormRope(kv, n, 1, d, w.kv_norm, inv_main);
    gpu::LaunchFakeQuantRows(kv, n, d, d, gpu::FakeQuant::kFp8Pow2, 32, cur_stream());
    Linear(w.wq_a, xn, D, n, cq, qlr);
    RmsNorm(cq, qlr, cq, qlr, n, qlr, w.q_norm);
    Linear(w.wq_b, cq, qlr, n, q, H * d);  // its RoPE: in the attention (no per-head norm)
    gpu::DSparkGatherParams gp;            // each request's last W context rows of this stage
    gp.ring = ds.rings[static_cast<size_t>(s)];
    gp.slot = Meta(n).slot;
    gp.start = Meta(n).pos;
    gp.stride = B;
    gp.requests = R;
    gp.window = W;
    gp.dim = d;
    gp.out = ds.ctx;
    gp.len = ds.ctx_len;
    gpu::LaunchDSparkGatherContext(gp, cur_stream());
    gpu::DSparkAttentionParams ap;
    ap.q = q;
    ap.block = kv;
    ap.ctx = ds.ctx;
    ap.ctx_len = ds.ctx_len;
    ap.ctx_stride = W;
    ap.requests = R;
    ap.block_size = static_cast<int>(B);
    ap.heads = static_cast<int>(H);
    ap.dim = static_cast<int>(d);
    ap.sink = w.sink;
    ap.scale = 1.0f / std::sqrt(static_cast<float>(d));
    ap.rope_dim = c.rope_head_dim;
    ap.inv_freq = inv_main;
    ap.positions = Meta(n).pos;
    ap.out = o;
    ap.q_rope = true;
    gpu::LaunchDSparkAttention(ap, cur_stream());
    Linear(w.wo_a, o, H * d, n, z, G * olr, olr, H * d / G);
    Linear(w.wo_b, z, G * olr, n, y, D);
    HcPost(n, nullptr, &w.hc_ffn.fn);
    HcPre(w.hc_ffn, n, w.ffn_norm, false, 0, v.pre_attn, v.pre_mix);
    const gpu::MoeCombineParams combine = Moe(w, c.num_layers, n);  // its own sizes (BlockW)
    HcPost(n, &combine, s + 1 < S ? &ds.stages[static_cast<size_t>(s + 1)].hc_attn.fn : nullptr);
  }
  // The head: xh (the collapse with the last site's pre, before the norm), the norm, the head.
  gpu::DSparkCollapseParams cp;
  cp.x = X;
  cp.pre = v.pre_mix;
  cp.n = n;
  cp.hc = static_cast<int>(hc);
  cp.dim = D;
  cp.out = ds.xh;
  gpu::LaunchDSparkCollapse(cp, cur_stream());
  RmsNorm(ds.xh, D, ds.hn, D, n, D, ds.norm);
  if (ds.head_split != nullptr) {  // the tensor-core head, as the trunk's (tc_bf16)
    TcLinear(head, ds.hn, D, n, ds.logits, V, ds.head_split);
  } else {
    Linear(head, ds.hn, D, n, ds.logits, V);
  }
  // Slot by slot: the Markov term of the previous token (the anchor, then the last draft), the
  // greedy draft and the confidence logit.
  const int r = vc.dspark_markov_rank;
  for (int64_t k = 0; k < B; ++k) {
    gpu::MarkovStepParams mp;
    mp.logits = ds.logits + k * V;
    mp.ld_logits = B * V;
    mp.requests = R;
    mp.vocab = V;
    mp.rank = r;
    mp.embed = r > 0 ? ds.markov_embed.data : nullptr;
    mp.head = r > 0 ? ds.markov_head.data : nullptr;
    mp.bf16 = r > 0 && ds.markov_embed.format == WeightFormat::kBf16;
    mp.prev = ds.prev;
    mp.xh = ds.xh + k * D;
    mp.ld_xh = B * D;
    mp.hidden = D;
    mp.confidence_w = ds.confidence;
    mp.confidence = ds.conf + k * R;
    mp.ids = ds.ids + k * R;
    mp.best_v = ds.markov_best_v;
    mp.best_i = ds.markov_best_i;
    gpu::LaunchMarkovStep(mp, cur_stream());
  }
  gpu::CopyToHost(ds.out_host.get(), ds.ids, static_cast<size_t>(B * R) * sizeof(int32_t),
                  stream.get());
  gpu::CopyToHost(ds.out_host.as<int32_t>() + B * opt.max_seqs, ds.conf,
                  static_cast<size_t>(B * R) * sizeof(float), stream.get());
}

// The pass's kernels and shapes depend only on R: they read the uploaded metadata (Meta(R * B)),
// the anchors in ds->prev and the rings, and write ds->out_host.
gpu::Graph& CudaModel::Impl::DSparkGraph(int64_t R) {
  auto& graph = dspark_graphs[R];
  if (!graph) {
    graph = std::make_unique<gpu::Graph>();
    graph->BeginCapture(stream.get());
    DSparkDraft(R);
    graph->EndCapture(stream.get());
  }
  return *graph;
}

void CudaModel::Impl::ReplayDSpark(int64_t R) {
  if (!opt.graphs) {
    DSparkDraft(R);
    return;
  }
  DSparkGraph(R).Launch(stream.get());
  ++replays.dspark;
}

void CudaModel::Impl::AllocateDSpark() {
  DSparkParts& ds = *v41->ds;
  const io::DeepseekV41Config& vc = v41->c;
  const int64_t T = opt.max_tokens, S = std::max<int64_t>(opt.max_seqs, 1);
  const int64_t B = vc.dspark_block_size, D = c.hidden_size, d = c.head_dim, V = c.vocab_size;
  const auto taps = static_cast<int64_t>(vc.dspark_target_layer_ids.size());
  ds.taps = Alloc<float>(T * taps * D);
  ds.main_x = Alloc<float>(T * D);
  ds.ctx_kv = Alloc<float>(T * d);
  ds.ctx = Alloc<float>(S * c.sliding_window * d);
  ds.ctx_len = Alloc<int32_t>(S);
  ds.xh = Alloc<float>(S * B * D);
  ds.hn = Alloc<float>(S * B * D);
  ds.logits = Alloc<float>(S * B * V);
  ds.prev = Alloc<int32_t>(S);
  ds.ids = Alloc<int32_t>(S * B);
  ds.conf = Alloc<float>(S * B);
  ds.markov_best_v = Alloc<float>(S * gpu::MarkovStepTiles(V));
  ds.markov_best_i = Alloc<int32_t>(S * gpu::MarkovStepTiles(V));
  ds.out_host = gpu::PinnedBuffer(static_cast<size_t>(2 * S * B + S) * 4);
  if (TcHead()) ds.head_split = Alloc<uint16_t>(gpu::Bf16SplitElements(S * B, D));
  stream.Synchronize();
}

bool CudaModel::has_dspark() const { return impl_->v41 && impl_->v41->ds; }

StatusOr<std::vector<CudaModel::DSparkBlock>> CudaModel::DraftDSpark(
    const std::vector<DSparkRequest>& requests) {
  Impl& m = *impl_;
  if (!has_dspark()) return InvalidArgument("the CUDA model was loaded without its DSpark drafter");
  if (m.pools.empty()) return Internal("DraftDSpark before the state exists (UsePagedState)");
  const io::DeepseekV41Config& vc = m.v41->c;
  const auto R = static_cast<int64_t>(requests.size());
  const int64_t B = vc.dspark_block_size, S = m.opt.max_seqs;
  if (R > S) {
    return OutOfRange(std::to_string(R) + " sequences to draft for; the CUDA model holds " +
                      std::to_string(S));
  }
  std::vector<DSparkBlock> out(requests.size());
  for (const DSparkRequest& req : requests) {
    if (req.anchor < 0 || req.anchor >= m.c.vocab_size) {
      return InvalidArgument("DraftDSpark: token id " + std::to_string(req.anchor) +
                             " is outside the vocabulary");
    }
    if (!m.opt.paged && (req.slot < 0 || req.slot >= S || !m.used[req.slot])) {
      return InvalidArgument("DraftDSpark: bad CUDA state slot");
    }
    if ((m.opt.paged ? req.length : m.lengths[req.slot]) < 1) {
      return InvalidArgument("DSpark drafts after a sequence with state");
    }
  }
  // Passes of at most max_tokens / B requests (the forward's activations hold max_tokens rows).
  const int64_t per_pass = std::max<int64_t>(1, m.opt.max_tokens / B);
  for (int64_t first = 0; first < R; first += per_pass) {
    const int64_t P = std::min(per_pass, R - first), n = P * B;
    m.uploaded.Synchronize();  // the host buffers are refilled below
    int32_t* h = m.meta_host.as<int32_t>();
    int32_t* anchors = m.v41->ds->out_host.as<int32_t>() + 2 * B * S;
    for (int64_t q = 0; q < P; ++q) {
      const DSparkRequest& req = requests[static_cast<size_t>(first + q)];
      int64_t length = 0;
      int row = 0;
      if (m.opt.paged) {
        length = req.length;
        row = static_cast<int>(q);
        DSINFER_RETURN_IF_ERROR(m.FillTableRow(q, req.pages, length));
      } else {
        length = m.lengths[req.slot];
        row = req.slot;
      }
      for (int64_t k = 0; k < B; ++k) {
        const MetaRow mr{h, n, q * B + k};
        mr.Set(k == 0 ? req.anchor : static_cast<int32_t>(vc.dspark_noise_token_id), length + k,
               row, q * B, length, B);
        mr.HeadRow(q * B + k);
        mr.Feed(-1);
      }
      anchors[q] = req.anchor;
    }
    m.Upload(m.opt.paged ? P : 0, n);
    gpu::CopyToDevice(m.v41->ds->prev, anchors, static_cast<size_t>(P) * sizeof(int32_t),
                      m.stream.get());
    m.ReplayDSpark(P);
    m.stream.Synchronize();
    m.uploaded.Record(m.stream.get());
    const int32_t* ids = m.v41->ds->out_host.as<int32_t>();
    const float* conf = m.v41->ds->out_host.as<float>() + B * S;
    for (int64_t q = 0; q < P; ++q) {
      DSparkBlock& b = out[static_cast<size_t>(first + q)];
      for (int64_t k = 0; k < B; ++k) {
        b.ids.push_back(ids[k * P + q]);
        b.confidence.push_back(conf[k * P + q]);
      }
    }
  }
  return out;
}

}  // namespace dsinfer::model::deepseek_v4::cuda
