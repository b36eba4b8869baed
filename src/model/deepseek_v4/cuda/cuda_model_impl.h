// Internal to the CUDA executor: the device weight/state structs and CudaModel::Impl, shared by
// cuda_model.cc (the forward pass and sequence API), cuda_model_state.cc, cuda_model_v41.cc and
// cuda_model_load.cc / cuda_model_load_v41.cc (loading a checkpoint or building device-random
// weights). Not part of the public API.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <utility>

#include "backend/cuda/attention_sparse.cuh"
#include "backend/cuda/bf16_tc_linear.cuh"
#include "backend/cuda/compressor.cuh"
#include "backend/cuda/dspark.cuh"
#include "backend/cuda/engram.cuh"
#include "backend/cuda/fake_quant.cuh"
#include "backend/cuda/hyper_connection.cuh"
#include "backend/cuda/indexer_topk.cuh"
#include "backend/cuda/linear.cuh"
#include "backend/cuda/moe_route.cuh"
#include "backend/cuda/mtp.cuh"
#include "backend/cuda/norm.cuh"
#include "backend/cuda/random_fill.cuh"
#include "backend/cuda/runtime.h"
#include "backend/cuda/sample.cuh"
#include "base/check.h"
#include "cache/memory_planner.h"
#include "io/deepseek_v41_config.h"
#include "io/quant.h"
#include "io/safetensors.h"
#include "model/deepseek_v4/cuda/cuda_model.h"
#include "model/deepseek_v4/rope_table.h"
#include "model/deepseek_v4/state_layout.h"

namespace dsinfer::model::deepseek_v4::cuda {

namespace gpu = backend::cuda;
using gpu::WeightFormat;
using gpu::WeightRef;


struct HcW {
  WeightRef fn;  // fp32 [(2+hc)*hc or hc, hc*D]
  float* base = nullptr;
  float* scale = nullptr;
};

struct CompressorW {
  int rate = 0, dim = 0;
  bool overlap = false;
  WeightRef wkv, wgate;  // [width, D]
  // Both as one [2 width, D] matrix (wgate's rows right after wkv's, unquantized): the two
  // projections in one launch. Unset (null data) when they were stored apart.
  WeightRef kv_gate;
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
  // The MoE's sizes when they are not the config's (DeepSeek-V4.1's DSpark stages): routed
  // experts, experts per token (0: the config's), norm_topk_prob (-1: the config's).
  int moe_experts = 0, moe_topk = 0, moe_norm_topk = -1;
};

// The MTP layer (spec §2.11): its projections of the token's embedding and of the main streams,
// their norms, its block (window-only, routed by bias) and its own hc_head + norm before the
// shared head.
struct MtpW {
  WeightRef e_proj, h_proj;
  float* enorm = nullptr;
  float* hnorm = nullptr;
  float* norm = nullptr;
  HcW hc_head;
  BlockW block;
};

// DeepSeek-V4.1 (cuda_model_v41.cc; its loading in cuda_model_load.cc): what its layers have beyond
// the V4 block's shared parts (BlockW: the mHC sites, the q / kv / output projections, the MoE).
struct V41LayerW {
  int ratio = 0;              // compress ratio, 0: window only
  int source = -1;            // ratio > 0: the KV source whose entries (and index keys) it reads
  bool kv_source = false;     // owns the compressor and the index keys
  bool index_source = false;  // computes its own top-k (a KV source, or a Reindex layer)
  WeightRef comp_wkv, comp_wgate, comp_kv_gate;  // kv_gate: both in one matrix when stored so
  float* comp_norm = nullptr;
  WeightRef idx_wq_b, idx_weights_proj;
  WeightRef idx_wk;  // KV sources
  float* idx_k_norm = nullptr;
  int engram = -1;                     // index among the Engram layers, -1: none
  const void* engram_table = nullptr;  // [rows, engram_head_dim] in engram_format
  int engram_format = 0;               // EngramGatherParams::table_format
  float* engram_scale = nullptr;       // fp32 scales (e4m3 tables)
  WeightRef engram_wkv;
  float* engram_qk = nullptr;  // [hc, D] q_weight * k_weight

  // Layer l's mode by the config (no weights yet).
  static V41LayerW ModeOf(const io::DeepseekV41Config& c, int l) {
    V41LayerW x;
    x.ratio = c.compress_ratios[l];
    x.source = x.ratio > 0 ? c.KvSourceOf(l) : -1;
    x.kv_source = c.IsKvSource(l);
    x.index_source = c.IsIndexSource(l);
    for (size_t e = 0; e < c.engram_layer_ids.size(); ++e) {
      if (c.engram_layer_ids[e] == l) x.engram = static_cast<int>(e);
    }
    return x;
  }
};

// DeepSeek-V4.1's DSpark drafter (CudaModelOptions::dspark; cuda_model_dspark.cc): its weights
// (mtp.*), its context rings in the state, and its activations.
struct DSparkParts {
  WeightRef main_proj;  // [D, taps * D]
  float* main_norm = nullptr;
  std::vector<BlockW> stages;           // window-only blocks, their MoE of the dspark_* sizes
  float* norm = nullptr;                // the last stage's, before the trunk's head
  WeightRef markov_embed, markov_head;  // [V, r] (r = 0: unset), both bf16 or both fp32
  float* confidence = nullptr;          // [D + r]
  std::vector<gpu::RingRef> rings;      // per stage: the context K=V rows by position
  // The forward's: the taps [max_tokens, taps * D], main_x [max_tokens, D], a stage's K=V rows
  // [max_tokens, d]. A draft's (R requests of B slots): the gathered context [max_seqs, W, d] and
  // its rows [max_seqs], xh [max_seqs * B, D], the logits [max_seqs * B, V], the previous token
  // [max_seqs], the ids and confidences [B, max_seqs] (device and pinned host).
  float *taps = nullptr, *main_x = nullptr, *ctx_kv = nullptr;
  float* ctx = nullptr;
  int32_t* ctx_len = nullptr;
  float *xh = nullptr, *hn = nullptr, *logits = nullptr;
  int32_t *prev = nullptr, *ids = nullptr;
  float* conf = nullptr;
  float* markov_best_v = nullptr;  // the Markov step's scratch [max_seqs, MarkovStepTiles(V)]
  int32_t* markov_best_i = nullptr;
  uint16_t* head_split = nullptr;  // the tensor-core head's split rows [max_seqs * B] (tc_bf16)
  // [B, max_seqs] ids, then [B, max_seqs] confidences, then [max_seqs] the anchors.
  gpu::PinnedBuffer out_host;
  // The index of layer l among the taps, -1: none.
  int TapOf(const io::DeepseekV41Config& c, int l) const {
    for (size_t j = 0; j < c.dspark_target_layer_ids.size(); ++j) {
      if (c.dspark_target_layer_ids[j] == l) return static_cast<int>(j);
    }
    return -1;
  }
};

struct V41Parts {
  io::DeepseekV41Config c;
  std::vector<V41LayerW> layers;
  // The Engram hash constants on the device (EngramHashParams).
  int32_t* token_map = nullptr;
  int64_t *multipliers = nullptr, *primes = nullptr, *offsets = nullptr;
  // Activations [max_tokens, ...]: the single-pass mHC's collapse weights (the attention site's,
  // the FFN site's = the next block's, the first site's one-hot stream 0, the head rows'), the
  // compressor's pre-RoPE latents and their index keys, the proj of ratio-1 compressors (its gate
  // half stays zero: a softmax over one row weighs it exactly 1), the candidate-block masks, the
  // Engram hash ids, gathered rows and projections.
  float *pre_attn = nullptr, *pre_mix = nullptr, *pre_first = nullptr, *pre_head = nullptr;
  float *latent = nullptr, *ikeys = nullptr, *proj1 = nullptr;
  uint8_t* candidates = nullptr;
  int candidate_stride = 0;
  int64_t* hash_ids = nullptr;
  float *erows = nullptr, *ekv = nullptr;
  uint16_t* engram_split = nullptr;  // the bf16 projection's split rows (CudaModelOptions::tc_bf16)
  gpu::RingRef tokens;               // the Engram look-back: token ids by position (int32 bits)
  std::unique_ptr<DSparkParts> ds;   // CudaModelOptions::dspark
};

struct LayerState {
  gpu::RingRef window;
  gpu::RingRef comp_rows;
  gpu::ListRef comp_entries;
  gpu::RingRef index_rows;
  gpu::ListRef index_entries;
};

// The sparse attention's shape from the config (heads, head_dim, RoPE dims, window, the top-k
// stride of a selection, the softmax scale): what the kernel's Validate() checks at load, and
// what every layer's attention (V4 and V4.1) starts from.
inline gpu::SparseAttentionParams AttentionShape(const io::DeepseekV4Config& c) {
  gpu::SparseAttentionParams ap;
  ap.heads = static_cast<int>(c.num_heads);
  ap.dim = static_cast<int>(c.head_dim);
  ap.rope_dim = static_cast<int>(c.rope_head_dim);
  ap.window_size = c.sliding_window;
  ap.sel_stride = c.index_topk;
  ap.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  return ap;
}

// ids, pos, slot, seg_begin, seg_start, seg_count, head rows, feed (paged mode: the feed source
// entry of a row's id, or -1); each of the step's n rows (Impl::Meta)
inline constexpr int kMetaArrays = 8;
// The MTP rows' metadata: the same arrays, then each row's streams source (MtpGatherParams::src).
inline constexpr int kMtpMetaArrays = kMetaArrays + 1;

// Writes row r of a step's host metadata of T rows (the arrays above, each T long).
struct MetaRow {
  int32_t* h;
  int64_t T, r;
  // The row's token and position; its sequence's table row, first batch row, first position and
  // rows in this call.
  void Set(int32_t id, int64_t pos, int64_t slot, int64_t seg_begin, int64_t seg_start,
           int64_t seg_count) const {
    h[r] = id;
    h[T + r] = static_cast<int32_t>(pos);
    h[2 * T + r] = static_cast<int32_t>(slot);
    h[3 * T + r] = static_cast<int32_t>(seg_begin);
    h[4 * T + r] = static_cast<int32_t>(seg_start);
    h[5 * T + r] = static_cast<int32_t>(seg_count);
  }
  void Feed(int64_t entry) const { h[7 * T + r] = static_cast<int32_t>(entry); }
  void HeadRow(int64_t row) const { h[6 * T + r] = static_cast<int32_t>(row); }
  void StreamsSource(int64_t row) const { h[8 * T + r] = static_cast<int32_t>(row); }  // MTP
};
// The streams ring keeps the rows a rollback can return to (the last row kept included).
inline constexpr int64_t kMtpStreamRows = CudaModel::kMaxRollback + 1;
inline constexpr int kRollbackSlack = CudaModel::kMaxRollback;
static_assert(kRollbackSlack >= 1,
              "the window ring holds at least W entries (Attention's decode append)");

struct CudaModel::Impl {
  io::DeepseekV4Config c;
  CudaModelOptions opt;
  std::vector<gpu::DeviceBuffer> owned;       // every device allocation of weights and state
  std::vector<gpu::PinnedBuffer> host_owned;  // weights kept in host memory (Engram tables)
  size_t weight_bytes = 0;
  size_t dense_bytes = 0;

  std::unique_ptr<V41Parts> v41;  // DeepSeek-V4.1 models (c is then its V4 view: V41View)
  WeightRef embed;  // bf16 or f32 [V, D]
  WeightRef head;
  float* norm = nullptr;
  HcW hc_head;
  std::vector<BlockW> layers;
  bool has_mtp = false;  // CudaModelOptions::mtp, loaded
  MtpW mtp;
  float* inv_main = nullptr;
  float* inv_compress = nullptr;

  // Per-request state: one device pool per component of StateLayoutFor(c), in the plan's order,
  // and the step's page table [max_seqs, table_cols] int32 (each pool's columns at its offset).
  // Slot mode (the model's own sequences: bench, logits, tests): slot s owns pages
  // [s * per_seq, (s + 1) * per_seq) of every pool, and table row s lists them (uploaded once).
  // Paged mode (CudaModelOptions::paged, the engine): the caller's cache assigns the pages, and
  // each ForwardPaged writes the rows of its sequences.
  struct Pool {
    cache::PoolPlan plan;
    float* data = nullptr;
    int64_t table_offset = 0;  // first column of this pool in a table row
    int64_t per_seq = 0;       // pages a sequence can hold: its columns
    int64_t page_floats() const { return plan.page_bytes() / 4; }
  };
  std::vector<Pool> pools;
  int64_t table_cols = 0;
  int32_t* table_dev = nullptr;
  gpu::PinnedBuffer table_host;
  std::vector<LayerState> state;  // [num_layers + 1]: the MTP layer's last
  gpu::RingRef mtp_streams;       // the main streams kept per position (has_mtp)
  std::vector<int64_t> lengths;   // slot mode
  std::vector<bool> used;         // slot mode

  gpu::Stream stream;  // the main stream: copies, graph capture, and everything not in a branch
  // Independent chains of a layer (the kv projection, the compressor, the indexer, the shared
  // expert) run on branch streams forked from and joined back into the main stream, so that
  // their small, latency-bound kernels overlap. Off in the per-op profile (serial, so that the
  // marks mean something) and with CudaModelOptions::branches false. Results do not depend on it:
  // every kernel reads and writes the same buffers in the same dependency order.
  static constexpr int kBranches = 4;
  gpu::Stream branch_stream[kBranches];
  gpu::Event fork_ev[kBranches], join_ev[kBranches];
  gpu::StreamHandle cur = nullptr;  // the stream the launch helpers use (null: main)
  gpu::StreamHandle cur_stream() const { return cur ? cur : stream.get(); }
  // act_quant scratch of the FP8/FP4 linears (linear.cuh), one per stream: [0] main, [1 + b] branch b.
  gpu::ActQuantScratch aq_scratch[kBranches + 1];
  // The branch the launch helpers enqueue on now (inside Branch()), -1 for the main stream.
  int CurBranch() const {
    for (int b = 0; b < kBranches; ++b)
      if (cur != nullptr && cur == branch_stream[b].get()) return b;
    return -1;
  }
  gpu::ActQuantScratch Aq() const { return aq_scratch[1 + CurBranch()]; }
  // A bf16 linear on the tensor cores (CudaModelOptions::tc_bf16).
  bool TcBf16(const WeightRef& w) const {
    return w.data != nullptr && w.format == WeightFormat::kBf16 && opt.tc_bf16 &&
           gpu::Bf16TcLinearSupports(w.n, w.k);
  }
  // The router's gate on the tensor cores (CudaModelOptions::tc_gate): whether its weights take
  // them, and (TcGate) whether it runs there (through xn_split, allocated when some gate does).
  bool TcGateWeight(const WeightRef& gate) const { return opt.tc_gate && TcBf16(gate); }
  bool TcGate(const WeightRef& gate) const { return xn_split != nullptr && TcGateWeight(gate); }
  // The head on the tensor cores (bf16 heads).
  bool TcHead() const {
    return head.format == WeightFormat::kBf16 && opt.tc_bf16 &&
           gpu::Bf16TcLinearSupports(c.vocab_size, c.hidden_size);
  }
  // A compressor's projection(s): both in one matrix, or wkv (wgate has its shape and format).
  static const WeightRef& CompressorMatrix(const CompressorW& cw) {
    return cw.kv_gate.data ? cw.kv_gate : cw.wkv;
  }
  // Whether some compressor projection of block w takes the tensor cores.
  bool HasTcCompressor(const BlockW& w) const {
    return (w.has_comp && TcBf16(CompressorMatrix(w.comp))) ||
           (w.has_idx && TcBf16(CompressorMatrix(w.idx_comp)));
  }
  // DeepSeek-V4.1: a KV source's compressor projection(s), both in one matrix when stored so
  // (ratio > 1) or wkv.
  static const WeightRef& V41CompressorMatrix(const V41LayerW& x) {
    return x.ratio > 1 && x.comp_kv_gate.data != nullptr ? x.comp_kv_gate : x.comp_wkv;
  }
  // Whether block w's compressors read xn's split rows (xn_split: allocated when some block's, or
  // some router gate, do).
  bool TcCompressors(const BlockW& w) const { return xn_split != nullptr && HasTcCompressor(w); }
  bool Concurrent() const { return opt.branches && profile == nullptr; }
  // Enqueues fn's launches on branch b, after everything enqueued on the main stream so far.
  template <typename Fn>
  void Branch(int b, Fn&& fn) {
    if (!Concurrent()) {
      fn();
      return;
    }
    fork_ev[b].Record(stream.get());
    fork_ev[b].Wait(branch_stream[b].get());
    cur = branch_stream[b].get();
    fn();
    cur = nullptr;
  }
  // The later work of `target` waits for branch b's launches so far.
  void JoinInto(int b, gpu::StreamHandle target) {
    if (!Concurrent()) return;
    join_ev[b].Record(branch_stream[b].get());
    join_ev[b].Wait(target);
  }
  void Join(int b) { JoinInto(b, stream.get()); }               // into the main stream
  // A join in two halves: Checkpoint(b) marks branch b's launches so far; WaitCheckpoint(b) makes
  // the main stream's later work wait for them (not for what branch b gets in between).
  void Checkpoint(int b) {
    if (Concurrent()) join_ev[b].Record(branch_stream[b].get());
  }
  void WaitCheckpoint(int b, gpu::StreamHandle target = nullptr) {
    if (Concurrent()) join_ev[b].Wait(target ? target : stream.get());
  }
  void JoinIntoCurrent(int b) { JoinInto(b, cur_stream()); }    // inside Branch()
  gpu::PinnedBuffer meta_host;  // [kMetaArrays, max_tokens] int32
  gpu::PinnedBuffer sampled_host;
  int32_t* meta_dev = nullptr;
  int32_t* sampled_dev = nullptr;
  int64_t logits_rows = 0;

  // Activations [max_tokens, ...].
  float *X, *mix, *post, *comb, *xn, *cq, *q, *kv, *proj, *iproj, *qi, *wi, *o, *z, *y;
  // DeepSeek-V4 with the FP8 cache: kv's rows packed as the state stores them [max_tokens,
  // WindowFormat's row floats] (what the attention and the window ring read); else null.
  float* kv_packed = nullptr;
  int32_t *sel, *sel_count;
  float* iscores = nullptr;  // indexer score scratch [iscore_rows, index entries capacity]
  int64_t iscore_rows = 0;
  float *rlog, *rwt;
  int32_t *rsel, *counts, *active, *num_active, *offsets, *pairs;
  int32_t* route_done;  // the fused route + grouping's block counter (zero between launches)
  float *g, *gu, *ys, *sg, *su, *sy;
  // Expert parallelism (CudaModel::SetExpertParallel, cuda_model_expert_parallel.cc): the group
  // and placements, the experts this model holds (Load's filter), the group's first error in this
  // forward (its later exchanges are skipped), and the received rows' device scratch (grow-only:
  // rows, SwiGLU, outputs, and the grouping's int32 arrays).
  CudaModel::ExpertParallelRank ep_rank;
  ExpertFilter ep_holds;
  Status ep_status;
  gpu::DeviceBuffer ep_x, ep_g, ep_u, ep_y, ep_meta;
  int64_t ep_rows = 0;
  // The layer's routed experts of this forward's n rows through the group: ys as Moe's own
  // experts would leave it.
  void ExchangeExperts(const BlockW& w, int layer, int64_t n);
  // Runs this rank's experts over rows grouped by expert (rows [total, D], experts ascending,
  // offsets into the rows), outputs into out [total, D] on the host.
  void RunReceivedExperts(const BlockW& w, const std::vector<float>& rows,
                          const std::vector<int32_t>& experts, const std::vector<int64_t>& starts,
                          float* out);
  float *xs, *hz, *logits;
  uint16_t* head_split = nullptr;  // the tensor-core head's split rows (bf16 heads)
  // xn's split rows for the compressors' bf16 projections on the tensor cores (TcCompressors).
  uint16_t* xn_split = nullptr;
  int64_t xn_split_rows = 0;
  // The MoE inputs (the normalized x, then the routed experts' SwiGLU output) quantized once per
  // token for up to kMoeQuantRows rows (every decode batch and small prefill chunks: from 1,365
  // tokens the routed experts take the tiled GEMM, with its own pre-pass) instead of by every
  // block of the expert linears (each 16 weight rows quantized their tokens again: decode batch
  // 128's routed experts 14.5 -> 8.x ms, docs/perf.md session 27). The attention's FP8/FP4
  // projections of x take their rows quantized by the mHC finish (XnQuant) up to kXnQuantRows.
  static constexpr int64_t kMoeQuantRows = 1024;
  static constexpr int64_t kXnQuantRows = 16;
  uint16_t *xq_buf = nullptr, *gq_buf = nullptr;
  float *xs_buf = nullptr, *gs_buf = nullptr;
  // The FP8-instruction mode (opt.fp8_mma): xn's act_quant codes in xn_c / xn_cs (ldcs
  // MmaScaleLd(max_tokens)), made once for every projection of it (each would quantize xn again),
  // by the HcPre that wrote xn (its `codes`: then xn_codes_rows = n) or else here. XnCodes(mma,
  // n): them (`mma`: the projections about to run take the mode's form; else nothing), once: the
  // branches that read them join before the next HcPre or XnCodes rewrites them.
  uint8_t* xn_c = nullptr;
  float* xn_cs = nullptr;
  int64_t xn_codes_rows = -1;
  gpu::QuantizedRows XnCodes(bool mma, int64_t n) {
    const bool made = xn_codes_rows == n;
    xn_codes_rows = -1;
    if (!mma || xn_c == nullptr) return {};
    const int64_t D = c.hidden_size;
    if (!made) return gpu::LaunchMmaActQuantRows(xn, D, n, D, xn_c, xn_cs, cur_stream());
    return XnCodesView();
  }
  // The view HcPre writes xn_c / xn_cs in and XnCodes hands on: pitches over max_tokens rows.
  gpu::QuantizedRows XnCodesView() const {
    return gpu::MmaCodes(xn_c, xn_cs, opt.max_tokens, c.hidden_size);
  }
  // Whether the MoE's projections of xn take the mode's codes (XnCodes).
  static bool MoeCodes(const BlockW& w) {
    return w.experts.w1.mma || (w.has_shared && w.sh_w1.mma);
  }
  // Up to kXnQuantRows rows: the mHC finish before the attention act_quant's its normalized
  // x into xq_buf / xs_buf as well (XnQuant), for the attention's FP8/FP4 projections of x,
  // instead of each of their warps quantizing its slice (the same bits; docs/perf.md round 15).
  gpu::QuantizedRows XnQuant() const {
    gpu::QuantizedRows r;
    r.q = xq_buf; r.ldq = gpu::QuantizedLd(c.hidden_size);
    r.s = xs_buf; r.lds = gpu::QuantizedScales(c.hidden_size);
    return r;
  }
  // Up to kXnQuantRows rows with a shared expert: the routed experts wait for the shared expert's
  // w1 + w3 and its w2 joins before the routed w2 (instead of after it, before the mHC post), so
  // that the shared expert's blocks do not wait for room behind the routed experts' early-resident
  // ones and the mHC post has one predecessor (the old order measured slower: docs/perf.md round
  // 15). When the mHC finishes let the next kernels launch (PDL; HcPreFinishParams::trigger):
  // launched early, those load their weights before their wait, which raises the memory latency of
  // the latency-bound kernels still running. The finish before the attention triggers after its
  // stores (the attention's projections then do not preload beside the mHC post before it), the one
  // before the MoE after its wait (measured on an H200, docs/perf.md round 15).
  static constexpr int kHcPreTriggerAttn = 2;  // HcPreFinishParams::trigger: after the stores
  static constexpr int kHcPreTriggerFfn = 1;   // after the wait
  // The q-lora rows quantized by their RMSNorm for wq_b and the indexer's wq_b, up to this many.
  static constexpr int64_t kNormQuantRows = 16;
  uint16_t* cq_q = nullptr;
  float* cq_s = nullptr;
  // The attention output quantized by the attention kernel for wo_a, up to this many rows.
  static constexpr int64_t kAttnOutQuantRows = 16;
  uint16_t* o_q = nullptr;
  float* o_s = nullptr;
  // The tensor-core attention's split workspace (KernelOptions::AttentionTcFor; null without it):
  // kAttnSplitFloats (64 MB), which holds a decode step's chunk partials up to ~50 rows of CSA at
  // 64 heads (a launch that needs more runs unsplit, the same bits).
  static constexpr int64_t kAttnSplitFloats = int64_t{16} << 20;
  float* attn_split = nullptr;
  // The row block's pre-decoded keys (KernelOptions::attention_row_prepass with the FP8 cache;
  // null without): 2 max_tokens head_dim bf16 (SparseAttentionParams::keys16), and whether the
  // metadata last uploaded to meta_from_zero_dev (Upload) has every row's sequence start at
  // position 0 (seg_start 0: keys16's contract), so that a forward on other metadata (the MTP
  // rows' swapped meta_dev) takes no pre-pass.
  uint16_t* row_keys = nullptr;
  int64_t row_keys_elems = 0;
  const int32_t* meta_from_zero_dev = nullptr;

  // The MTP layer's activations and metadata (has_mtp): its streams X [max_tokens, hc, D], its
  // gathered input streams, the token embedding and its projection [max_tokens, D], the draft
  // head's rows [max_seqs, ...] and logits, the drafted ids.
  float *mtp_X = nullptr, *mtp_hin = nullptr, *mtp_e = nullptr, *mtp_ep = nullptr;
  float *mtp_xs = nullptr, *mtp_hz = nullptr, *mtp_logits = nullptr;
  int32_t* mtp_meta_dev = nullptr;
  int32_t* mtp_ids_dev = nullptr;
  gpu::PinnedBuffer mtp_meta_host, mtp_ids_host;
  // DraftMtp's chain of `levels` levels of T rows over the uploaded metadata (level l's at
  // mtp_meta_dev + l * kMtpMetaArrays * T; its argmax ids at mtp_ids_dev + l * T, then all of
  // them copied to mtp_ids_host), its graph (captured if new), and either launched.
  void MtpChain(int64_t T, int levels);
  gpu::Graph& MtpChainGraph(int64_t T, int levels);
  void ReplayMtpChain(int64_t T, int levels);
  // DraftMtp's chains by (rows, levels) (CudaModelOptions::graphs): each level's MTP forward
  // and argmax, the next level's tokens fed from it on the device, then the ids.
  std::map<std::pair<int64_t, int>, std::unique_ptr<gpu::Graph>> mtp_graphs;

  std::map<int64_t, std::unique_ptr<gpu::Graph>> graphs;  // DecodeStep's, by batch size
  // ForwardPaged's graphed steps by (rows, one row per sequence): a step's kernels and their shapes
  // depend on nothing else (they read the uploaded metadata; the head runs over every row).
  std::map<std::pair<int64_t, bool>, std::unique_ptr<gpu::Graph>> paged_graphs;
  GraphReplays replays;
  // Captures (if new) and launches the graph of a paged step of n rows.
  void ReplayPaged(int64_t n, bool one_per_seq);
  // Paged mode: the last step's uploads of table_host / meta_host are done (the host may refill
  // them); the feed source of PagedChunk::feed.
  gpu::Event uploaded;
  const int32_t* feed_source = nullptr;
  gpu::EventLog* profile = nullptr;  // eager per-op breakdown when set
  void Mark(const char* name) {
    if (profile) profile->Mark(stream.get(), name);
  }

  template <typename T>
  T* Alloc(int64_t count) {
    owned.emplace_back(static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(T));
    return owned.back().as<T>();
  }
  // Device arrays [E] of the routed experts' pointers; tables = per-expert w1 data, w1 scale,
  // w3 data, w3 scale, w2 data, w2 scale (host), in expert order.
  void UploadExpertTables(const std::vector<const void*> (&tables)[6], ExpertsW* ex) {
    const void** dev[6];
    for (int i = 0; i < 6; ++i) {
      dev[i] = Alloc<const void*>(static_cast<int64_t>(tables[i].size()));
      gpu::CopyToDeviceSync(dev[i], tables[i].data(), tables[i].size() * sizeof(void*));
    }
    ex->w1_data = dev[0]; ex->w1_scale = dev[1]; ex->w3_data = dev[2]; ex->w3_scale = dev[3];
    ex->w2_data = dev[4]; ex->w2_scale = dev[5];
  }

  float* UploadF32(const std::vector<float>& v) {
    float* p = Alloc<float>(static_cast<int64_t>(v.size()));
    gpu::CopyToDeviceSync(p, v.data(), v.size() * 4);
    return p;
  }

  // The step's token metadata: kMetaArrays arrays of n entries each, back to back (FillMeta), so
  // that a decode step uploads only what it uses; a graph captured for n rows keeps these views.
  gpu::TokenMeta Meta(int64_t n) const {
    const int64_t T = n;
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
  const int32_t* HeadRows(int64_t n) const { return meta_dev + 6 * n; }
  const float* InvFreq(int rate) const { return rate == 0 ? inv_main : inv_compress; }

  // Entries a sequence's list of `rate` can reach within the context; the index keys' of layer l
  // (0 for layers without an indexer).
  int64_t EntryCapacity(int64_t rate) const { return opt.max_len / rate + 1; }
  int64_t IndexCapacity(int l) const {
    if (v41) {
      const V41LayerW& x = v41->layers[l];
      return x.index_source && x.ratio > 0 ? EntryCapacity(x.ratio) : 0;
    }
    return c.compress_ratios[l] == c.csa_rate && c.compress_ratios[l] > 0
               ? EntryCapacity(c.compress_ratios[l])
               : 0;
  }
  bool MtpOn() const { return has_mtp; }  // loaded in paged mode only (Load refuses slot mode)
  cache::StateLayout Layout() const;      // the family's (CudaModel::state_layout)
  void AllocateState();                   // slot mode
  void BuildPools(const cache::MemoryPlan& plan);  // pools, page table and the LayerState views
  void AllocateActivations();
  // One step's sequences: table row (slot mode: the slot; paged: the step index), the tokens'
  // first position and the ids. Fills the token metadata, uploads it and enqueues the forward;
  // returns the logits rows.
  struct StepSeq {
    int row = 0;
    int64_t start = 0;
    const std::vector<int32_t>* ids = nullptr;
    int64_t tail = 1;  // LogitsRows::kTail: logits of this many trailing rows
    int feed = -1;     // paged mode: the last id's feed source entry (PagedChunk::feed)
  };
  int64_t EnqueueStep(const std::vector<StepSeq>& seqs, LogitsRows rows);
  // The checks every forward makes of its tokens: ids in the vocabulary, rows within max_tokens,
  // logits rows within the buffer.
  Status CheckStep(const std::vector<StepSeq>& seqs, LogitsRows rows) const;
  // The logits rows of one sequence of a step.
  static int64_t HeadRows(const StepSeq& sq, LogitsRows rows);
  // EnqueueStep's halves: the host metadata (returns the logits rows), then the upload (with the
  // first `table_rows` rows of the page table) and the forward: what a graph captures.
  int64_t FillMeta(const std::vector<StepSeq>& seqs, LogitsRows rows);
  int64_t longest_chunk = 0;  // FillMeta: the step's most rows of one sequence
  // The MTP rows of a step (MtpOn): each chunk's rows shifted back one position (a chunk at
  // position 0 loses its first row), into mtp_meta_host; returns their count.
  int64_t FillMtpMeta(const std::vector<StepSeq>& seqs);
  // Paged mode: table_host row `row` lists `pages` (per pool), which must hold `end` tokens.
  Status FillTableRow(int64_t row, const std::vector<const std::vector<int32_t>*>& pages,
                      int64_t end);
  void Launch(int64_t n, int64_t nrows, bool one_per_seq, int64_t table_rows);
  // Copies the metadata of a step of n rows (and n_mtp MTP rows) and the page table's first
  // table_rows rows.
  void Upload(int64_t table_rows, int64_t n, int64_t n_mtp = 0);
  // Whether w's linear takes its input rows quantized by the caller (gpu::QuantizedRows): FP8 /
  // FP4 in the default kernels' layout; the FP8-instruction mode (WeightRef::mma) quantizes its
  // own input, so no step quantizes rows for it.
  static bool TakesQuantizedRows(const WeightRef& w) {
    return gpu::IsQuantized(w.format) && !w.mma;
  }
  void Linear(const WeightRef& w, const float* x, int64_t ldx, int64_t m, float* yout, int64_t ldy,
              int64_t group_rows = 0, int64_t group_stride = 0) {
    Linear(w, x, ldx, m, yout, ldy, gpu::QuantizedRows{}, group_rows, group_stride);
  }
  // xq: x's rows quantized already (used when w is FP8/FP4 and xq.q is set).
  void Linear(const WeightRef& w, const float* x, int64_t ldx, int64_t m, float* yout, int64_t ldy,
              const gpu::QuantizedRows& xq, int64_t group_rows = 0, int64_t group_stride = 0) {
    gpu::LinearParams p;
    p.w = w; p.x = x; p.ldx = ldx; p.m = m; p.y = yout; p.ldy = ldy;
    p.x_group_rows = group_rows; p.x_group_stride = group_stride; p.aq = Aq();
    if ((xq.q != nullptr && TakesQuantizedRows(w)) || (xq.c != nullptr && w.mma)) p.xq = xq;
    gpu::LaunchLinear(p, cur_stream());
  }
  // qout, sout (optional): the normalized rows act_quant'ed as well (QuantizedLd /
  // QuantizedScales(dim)).
  void RmsNorm(const float* x, int64_t ldx, float* yv, int64_t ldy, int64_t rows, int64_t dim,
               const float* weight, uint16_t* qout = nullptr, float* sout = nullptr) {
    gpu::RmsNormParams p;
    p.x = x; p.ldx = ldx; p.y = yv; p.ldy = ldy; p.rows = rows; p.dim = dim; p.weight = weight;
    p.eps = static_cast<float>(c.rms_norm_eps);
    p.q = qout; p.ldq = gpu::QuantizedLd(dim); p.s = sout; p.lds = gpu::QuantizedScales(dim);
    gpu::LaunchRmsNorm(p, cur_stream());
  }
  // RMSNorm of each head row of x [n, heads, dim] in place, then RoPE of its trailing rope dims.
  // kv_fp8_block > 0: the rows then rounded as the FP8 cache stores K=V rows (64).
  // packed (with kv_fp8_block): the rows also stored as the state's packed K=V rows
  // (WindowFormat's), packed_ld floats apart.
  void RmsNormRope(float* x, int64_t n, int64_t heads, int64_t dim, const float* weight,
                   const float* inv, int kv_fp8_block = 0, float* packed = nullptr,
                   int64_t packed_ld = 0) {
    gpu::RmsNormRopeParams p;
    p.norm.x = x; p.norm.ldx = dim; p.norm.y = x; p.norm.ldy = dim; p.norm.rows = n * heads;
    p.norm.dim = dim; p.norm.weight = weight; p.norm.eps = static_cast<float>(c.rms_norm_eps);
    p.heads = heads; p.rope_dim = c.rope_head_dim; p.inv_freq = inv; p.pos = Meta(n).pos;
    p.kv_fp8_block = kv_fp8_block;
    p.kv_packed = packed;
    p.kv_packed_ld = packed_ld;
    gpu::LaunchRmsNormRope(p, cur_stream());
  }
  // Split-k partials of fn · x and x·x over the flat streams (hc * D) into `mix`.
  void HcMix(const float* xs_, int64_t n, const WeightRef& fn) {
    gpu::HcMixParams p;
    p.X = xs_; p.ldx = c.hc_mult * c.hidden_size; p.K = p.ldx; p.fn = static_cast<const float*>(fn.data);
    p.nout = static_cast<int>(fn.n); p.n = n; p.part = mix;
    gpu::LaunchHcMix(p, cur_stream());
  }
  // The mix partials of X for the next HcPre are in `mix` already (written by HcPost).
  bool mix_ready = false;
  // quant: xn also act_quant'ed into XnQuant() (n <= kXnQuantRows); codes: and into XnCodes' (the
  // FP8-instruction mode's form, where allocated). pre_in / pre_out: single-pass mHC
  // (HcPreFinishParams).
  void HcPre(const HcW& w, int64_t n, const float* norm_w, bool quant = false, int trigger = 0,
             const float* pre_in = nullptr, float* pre_out = nullptr, bool codes = false) {
    const int64_t D = c.hidden_size, hc = c.hc_mult;
    if (!mix_ready) HcMix(X, n, w.fn);
    gpu::HcPreFinishParams p;
    p.mix_slices = mix_ready ? gpu::HcPostMixSlices(static_cast<int>(hc), D) : 0;
    mix_ready = false;
    p.part = mix; p.rms_eps = static_cast<float>(c.rms_norm_eps); p.norm_w = norm_w; p.xn = xn;
    p.base = w.base; p.scale = w.scale; p.X = X; p.post = post; p.comb = comb;
    p.n = n; p.hc = static_cast<int>(hc); p.D = D; p.sinkhorn_iters = c.hc_sinkhorn_iters;
    p.hc_eps = static_cast<float>(c.hc_eps);
    p.trigger = trigger;
    p.pre_in = pre_in;
    p.pre_out = pre_out;
    if (quant) {
      p.xq = xq_buf; p.ldq = gpu::QuantizedLd(D); p.xs = xs_buf; p.lds = gpu::QuantizedScales(D);
    }
    xn_codes_rows = codes && xn_c != nullptr ? n : -1;
    if (xn_codes_rows >= 0) {
      const gpu::QuantizedRows r = XnCodesView();
      p.xc = xn_c;
      p.ldc = r.ldc;
      p.xcs = xn_cs;
      p.ldcs = r.ldcs;
    }
    gpu::LaunchHcPreFinish(p, cur_stream());
  }
  // The sublayer output is y, or (moe) the MoE combine, computed inside the post kernel; next_fn
  // (the next HcPre's mixing weights): its mix partials too, where the kernel can.
  void HcPost(int64_t n, const gpu::MoeCombineParams* moe, const WeightRef* next_fn) {
    gpu::HcPostParams p;
    p.y = moe ? nullptr : y;
    p.post = post;
    p.comb = comb;
    p.X = X;
    p.n = n;
    p.hc = c.hc_mult;
    p.D = c.hidden_size;
    if (moe) p.moe = *moe;
    mix_ready =
        next_fn != nullptr && gpu::HcPostMixSlices(c.hc_mult, c.hidden_size) > 0 && n <= 65535;
    if (mix_ready) {
      p.mix_fn = static_cast<const float*>(next_fn->data);
      p.mix_part = mix;
    }
    gpu::LaunchHcPost(p, cur_stream());
  }
  // The bf16 linear w on the tensor cores (bf16_tc_linear): x's m rows into y, through `split`
  // (Bf16SplitElements(m, w.k)), which holds x's bf16 parts already when presplit.
  void TcLinear(const WeightRef& w, const float* x, int64_t ldx, int64_t m, float* yout,
                int64_t ldy, uint16_t* split, bool presplit = false,
                gpu::Bf16TcTile tile = gpu::Bf16TcTile::kAuto) {
    gpu::Bf16TcLinearParams tp;
    tp.w = static_cast<const uint16_t*>(w.data);
    tp.n = w.n;
    tp.k = w.k;
    tp.x = x;
    tp.ldx = ldx;
    tp.m = m;
    tp.y = yout;
    tp.ldy = ldy;
    tp.split = split;
    tp.presplit = presplit;
    tp.tile = tile;
    gpu::LaunchBf16TcLinear(tp, cur_stream());
  }
  // A linear of x's m rows (width w.k, ld w.k) whose bf16 parts xsplit holds already
  // (LaunchBf16Split): on the tensor cores when TcBf16(w), else Linear (xq: as Linear's).
  void SplitLinear(const WeightRef& w, const float* x, const uint16_t* xsplit, int64_t m,
                   float* yout, int64_t ldy, const gpu::QuantizedRows& xq) {
    if (xsplit == nullptr || !TcBf16(w)) {
      Linear(w, x, w.k, m, yout, ldy, xq);
      return;
    }
    TcLinear(w, x, w.k, m, yout, ldy, const_cast<uint16_t*>(xsplit), true);  // read only
  }
  // xq: x's rows quantized already (optional, for FP8/FP4 projections); xsplit: their bf16 parts
  // (optional, for bf16 projections on the tensor cores).
  // With the FP8 cache the emitted entries are rounded as the CPU stores them (model/deepseek_v4/
  // state_layout.h's WindowFormat, or with `index_keys` the Hadamard + IndexKeyFormat).
  void Compressor(const CompressorW& cw, const float* x, int64_t n, float* pr,
                  const gpu::RingRef& rows, const gpu::ListRef& entries,
                  const gpu::QuantizedRows& xq, const uint16_t* xsplit, bool index_keys) {
    const int64_t width = cw.width();
    if (cw.kv_gate.data) {
      SplitLinear(cw.kv_gate, x, xsplit, n, pr, 2 * width, xq);
    } else {
      SplitLinear(cw.wkv, x, xsplit, n, pr, 2 * width, xq);
      SplitLinear(cw.wgate, x, xsplit, n, pr + width, 2 * width, xq);
    }
    gpu::LaunchAddApe(pr, n, width, cw.ape, cw.rate, Meta(n).pos, cur_stream());
    gpu::CompressEmitParams p;
    p.meta = Meta(n); p.proj = pr; p.rows = rows; p.entries = entries; p.rate = cw.rate;
    p.dim = cw.dim; p.overlap = cw.overlap; p.norm = cw.norm; p.eps = static_cast<float>(c.rms_norm_eps);
    p.rope_dim = c.rope_head_dim; p.inv_freq = inv_compress;
    if (Fp8Cache()) {
      p.entry_hadamard = index_keys;
      p.entry_quant = index_keys ? gpu::FakeQuant::kFp4Pow2 : gpu::FakeQuant::kFp8Pow2;
      p.entry_block = index_keys ? 32 : 64;
      p.entry_bf16_tail = index_keys ? 0 : c.rope_head_dim;
      p.entry_packed = true;  // the state's rows (entries.width: the packed row's floats)
    }
    gpu::LaunchCompressEmit(p, cur_stream());
  }
  // DeepSeek-V4 with the FP8 cache (io::KvCacheDtype::kFp8): its state rows packed as the CPU's
  // (WindowFormat, IndexKeyFormat).
  bool Fp8Cache() const { return c.kv_cache_dtype == io::KvCacheDtype::kFp8; }
  void RingAppend(const float* src, int64_t ld, const gpu::RingRef& ring, int64_t n) {
    gpu::RingAppendParams p;
    p.meta = Meta(n); p.src = src; p.ld = ld; p.ring = ring;
    gpu::LaunchRingAppend(p, cur_stream());
  }
  // one_per_seq: every sequence of the call has one row (decode steps); xnq: xn quantized already
  // (optional).
  void Attention(const BlockW& w, const LayerState& st, int64_t n, bool one_per_seq,
                 const gpu::QuantizedRows& xnq);
  // The attention's fields V4 and V4.1 share (AttentionShape, then this step's n query rows q
  // and K=V rows kv, the window ring, the layer's sink, the inverse RoPE `inv` and the output o):
  // the caller adds the compressed entries, the selection and the query's norm / RoPE. Few rows
  // and a quantized wo_a: the output is also act_quant'ed by the attention kernel (the bits
  // wo_a's blocks would compute each from o), *oq then naming those rows for wo_a (else left as
  // it is).
  gpu::SparseAttentionParams AttentionParams(const BlockW& w, const gpu::RingRef& window, int64_t n,
                                             const float* inv, gpu::QuantizedRows* oq);
  // Then the attention itself, the window-ring append of this call's K=V rows when it must follow
  // the attention (several rows per sequence: see Attention), and the output projection
  // (wo_a, wo_b) into y.
  void AttendAndProject(const BlockW& w, const gpu::SparseAttentionParams& ap,
                        const gpu::QuantizedRows& oq, const gpu::RingRef& window, int64_t n,
                        bool one_per_seq);
  gpu::MoeCombineParams Moe(const BlockW& w, int layer, int64_t n);  // all but the combine
  // DeepSeek-V4.1 (cuda_model_v41.cc): the block (single-pass mHC, Engram before it), its CSA2
  // attention with KV sharing and the two-level indexer, the Engram lookup, and the hash of the
  // step's rows (before the first block).
  void BlockV41(const BlockW& w, int layer, int64_t n, bool one_per_seq);
  void AttentionV41(const BlockW& w, int layer, int64_t n, bool one_per_seq,
                    const gpu::QuantizedRows& xnq);
  void EngramV41(int layer, int64_t n);
  void EngramHashV41(int64_t n);
  void AllocateV41();  // its activations and RoPE tables (after AllocateActivations)
  // DSpark (cuda_model_dspark.cc): layer l's tap of the streams entering it (a target layer);
  // after the layers, the context rows of the step's n rows into the stages' rings; a draft's
  // pass over the R blocks of the uploaded metadata (n = R * B rows), its ids and confidences
  // copied to ds->out_host; the activations.
  void DSparkTap(int layer, int64_t n);
  void DSparkContext(int64_t n);
  void DSparkDraft(int64_t R);
  // DSparkDraft(R)'s graph (captured if new), and DSparkDraft(R) launched as it
  // (CudaModelOptions::graphs) or eager.
  gpu::Graph& DSparkGraph(int64_t R);
  void ReplayDSpark(int64_t R);
  std::map<int64_t, std::unique_ptr<gpu::Graph>> dspark_graphs;  // by requests per pass
  void AllocateDSpark();
  void Block(const BlockW& w, int layer, int64_t n, bool one_per_seq) {
    if (v41) {
      BlockV41(w, layer, n, one_per_seq);
      return;
    }
    const bool attn_q =
        n <= kXnQuantRows && (TakesQuantizedRows(w.wq_a) || TakesQuantizedRows(w.wkv));
    Mark("hc_pre+norm");
    HcPre(w.hc_attn, n, w.attn_norm, attn_q, kHcPreTriggerAttn, nullptr, nullptr, w.wq_a.mma);
    Attention(w, state[layer], n, one_per_seq, attn_q ? XnQuant() : XnCodes(w.wq_a.mma, n));
    Mark("hc_post");
    HcPost(n, nullptr, &w.hc_ffn.fn);
    Mark("hc_pre+norm");
    HcPre(w.hc_ffn, n, w.ffn_norm, false, kHcPreTriggerFfn, nullptr, nullptr, MoeCodes(w));
    const gpu::MoeCombineParams combine = Moe(w, layer, n);
    Mark("hc_post");
    HcPost(n, &combine, layer + 1 < c.num_layers ? &layers[layer + 1].hc_attn.fn : nullptr);
  }
  // The MTP layer over the n rows of uploaded MTP metadata at `meta` (kMtpMetaArrays arrays of
  // n), in two halves. MtpGather: their fed tokens (entries of `feed`, when set), and their input
  // streams gathered from src_x (or the streams ring) into mtp_hin. MtpRun: the embedding's
  // projection added to the projected streams, the block, and with_head the draft logits of
  // every row into mtp_logits. Both leave the main X and metadata as they were.
  void MtpGather(int64_t n, const float* src_x, int32_t* meta, const int32_t* feed) {
    int32_t* const main_meta = meta_dev;
    meta_dev = meta;  // Meta(n), HeadRows(n): the MTP rows'
    Mark("mtp");
    if (feed != nullptr) gpu::LaunchFeedTokens(meta_dev, meta_dev + 7 * n, feed, n, cur_stream());
    gpu::MtpGatherParams gp;
    gp.meta = Meta(n);
    gp.src = meta_dev + kMetaArrays * n;
    gp.x = src_x;
    gp.ring = mtp_streams;
    gp.out = mtp_hin;
    gpu::LaunchMtpGatherStreams(gp, cur_stream());
    meta_dev = main_meta;
  }
  // The embedding rows of the step's n ids into out [n, hc, D] (every stream a copy).
  void Embed(float* out, int64_t n, int hc) {
    gpu::EmbedParams ep;
    ep.table = embed.data;
    ep.table_bf16 = embed.format == WeightFormat::kBf16;
    ep.ids = Meta(n).ids;
    ep.X = out;
    ep.n = n;
    ep.hc = hc;
    ep.D = c.hidden_size;
    gpu::LaunchEmbed(ep, cur_stream());
  }
  void MtpRun(int64_t n, bool one_per_seq, bool with_head, int32_t* meta) {
    const int64_t D = c.hidden_size, hc = c.hc_mult;
    int32_t* const main_meta = meta_dev;
    float* const main_x = X;
    meta_dev = meta;
    Embed(mtp_e, n, 1);  // e = enorm(embed[t]); ep = e_proj(e)
    RmsNorm(mtp_e, D, mtp_e, D, n, D, mtp.enorm);
    Linear(mtp.e_proj, mtp_e, D, n, mtp_ep, D);
    RmsNorm(mtp_hin, D, mtp_hin, D, n * hc, D, mtp.hnorm);  // X = h_proj(hnorm(h)) + ep
    X = mtp_X;
    Linear(mtp.h_proj, mtp_hin, D, n * hc, X, D);
    gpu::LaunchAddToStreams(X, mtp_ep, n, static_cast<int>(hc), D, cur_stream());
    mix_ready = false;
    Block(mtp.block, c.num_layers, n, one_per_seq);
    if (with_head) Head(mtp.hc_head, mtp.norm, n, n, mtp_xs, mtp_hz, mtp_logits);
    X = main_x;
    meta_dev = main_meta;
  }
  // hc_head + norm + the head over the first `rows` rows of X that HeadRows(n) names (a step of
  // n rows): streams gathered into xs [rows, hc, D], mixed and normalized into hz [rows, D],
  // logits [rows, V].
  // pre (single-pass mHC): the last site's collapse weights [n, hc] instead of hw's mix.
  void Head(const HcW& hw, const float* norm_w, int64_t n, int64_t rows, float* xs_out,
            float* hz_out, float* logits_out, const float* pre = nullptr) {
    const int64_t D = c.hidden_size, hc = c.hc_mult;
    gpu::LaunchGatherRows(X, HeadRows(n), rows, hc * D, xs_out, cur_stream());
    gpu::HcHeadFinishParams hp;
    if (pre != nullptr) {
      gpu::LaunchGatherRows(pre, HeadRows(n), rows, hc, v41->pre_head, cur_stream());
      hp.pre_in = v41->pre_head;
    } else {
      HcMix(xs_out, rows, hw.fn);
    }
    hp.part = mix;
    hp.rms_eps = static_cast<float>(c.rms_norm_eps);
    hp.norm_w = norm_w;
    hp.base = hw.base;
    hp.scale = hw.scale;
    hp.X = xs_out;
    hp.out = hz_out;
    hp.n = rows;
    hp.hc = static_cast<int>(hc);
    hp.D = D;
    hp.hc_eps = static_cast<float>(c.hc_eps);
    gpu::LaunchHcHeadFinish(hp, cur_stream());
    if (TcHead()) {  // every row count the same way: a row's logits never depend on the batch
      DSINFER_CHECK(head_split != nullptr);  // allocated after the head loads
      TcLinear(head, hz_out, D, rows, logits_out, c.vocab_size, head_split);
    } else {
      Linear(head, hz_out, D, rows, logits_out, c.vocab_size);
    }
  }
  // Embedding, every block, and the head over `rows` selected rows -> logits [rows, V]; then
  // (n_mtp > 0) the MTP layer over the step's n_mtp MTP rows, after the step's streams are kept.
  void Run(int64_t n, int64_t rows, bool one_per_seq, int64_t n_mtp = 0) {
    if (feed_source != nullptr) {
      gpu::LaunchFeedTokens(meta_dev, meta_dev + 7 * n, feed_source, n, cur_stream());
    }
    Embed(X, n, c.hc_mult);
    mix_ready = false;
    if (v41) EngramHashV41(n);
    for (int l = 0; l < c.num_layers; ++l) Block(layers[l], l, n, one_per_seq);
    if (v41 && v41->ds) DSparkContext(n);
    const int64_t D = c.hidden_size, hc = c.hc_mult;
    Mark("hc_head+head");
    Head(hc_head, norm, n, rows, xs, hz, logits, v41 ? v41->pre_mix : nullptr);
    if (MtpOn()) {
      // The MTP rows' input streams first: a chunk's first one is the ring's row of the position
      // before it, which this step's rows may overwrite. Then this step's streams are kept (also
      // when the step has no MTP row: a one-token prompt's streams are its first draft's).
      if (n_mtp > 0) MtpGather(n_mtp, X, mtp_meta_dev, feed_source);
      RingAppend(X, hc * D, mtp_streams, n);
      if (n_mtp > 0) MtpRun(n_mtp, one_per_seq, false, mtp_meta_dev);
    }
  }
};

}  // namespace dsinfer::model::deepseek_v4::cuda
