// `dsinfer bench`: benchmarks of the CUDA model on one GPU, printed as JSON lines.
//   decode: one step for a batch of requests at a given context (synthetic state of that length,
//           CUDA graph replay), with its HBM roofline: bytes of weights (checkpoint formats, only
//           the routed experts actually used) + state read per step, over the measured copy
//           bandwidth.
//   prefill: one prompt in one forward call (or --prefill-chunk's), tokens/s, with its FLOP count
//           over the FP8 tensor throughput bound (--fp8-tflops, default the measured 1,311 TFLOP/s
//           of DeepSeek's block-scaled FP8 GEMM via cuBLASLt on an H200); then the last chunk once
//           more, eager with per-op marks (prefill_profile_eager, its position the tokens before).
// Weights: --model DIR, or --preset NAME with random weights generated on the device.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>

#include "backend/cuda/runtime.h"
#include "cli/commands.h"
#include "cli/cuda_flags.h"
#include "cli/flags.h"
#include "model/deepseek_v4/cuda/cuda_model.h"
#include "model/deepseek_v4/init_presets.h"
#include "model/deepseek_v41/init_presets.h"

namespace dsinfer::cli {

namespace {

namespace gpu = backend::cuda;
using model::deepseek_v4::cuda::CudaModel;
using model::deepseek_v4::cuda::CudaModelOptions;

std::vector<FlagSpec> Specs() {
  std::vector<FlagSpec> specs = {
      {"model", "model dir (else --preset with device-random weights)"},
      {"preset",
       "preset for device-random weights (default flash-l8; v41-flash-l8: DeepSeek-V4.1)"},
      {"batches", "decode batch sizes (default 1,8,32,128,256)"},
      {"context", "decode context length (default 4096)"},
      {"prefill", "prefill prompt length (default 8192; 0: skip)"},
      {"prefill-chunk",
       "prefill in forward calls of at most this many tokens (default: the whole prompt in one; "
       "at most 65535)"},
      {"steps", "timed decode steps per batch (default 20)"},
      {"no-graph", "decode without CUDA graphs", false},
      {"fp8-tflops", "FP8 tensor bound for the prefill ratio (default 1311)"},
      {"profile-step", "one more decode step per batch inside a profiler range (ncu)", false},
      {"verify",
       "speculative verify steps of k drafts per sequence to time after each batch's decode, "
       "e.g. 1,2,3,4,5 (eager forwards of k + 1 tokens, then rolled back)"},
      {"dspark",
       "DeepSeek-V4.1: time DSpark's draft pass (a block per sequence) after each batch's decode "
       "(a v41 preset gets V4.1-Flash's 3 draft stages)",
       false},
      {"kv-cache-dtype",
       "the attention state: float32 (default) or fp8 (the official forward's rounding: "
       "docs/architecture.md)"},
      {"fp8-mma",
       "DeepSeek-V4: the FP8-instruction numerics mode (the FP8 / FP4 linears on wgmma .e4m3, "
       "fp32 promotion per 128 columns or FP4 group; other bits, batch-invariant)",
       false},
  };
  for (const FlagSpec& f : CudaFlagSpecs()) specs.push_back(f);
  return specs;
}

// The non-default tuning flags of this run ("no-pdl,gemv=none,..."), so that each A/B line says
// what it ran.
std::string SwitchesSet(const Flags& flags) {
  std::string s;
  if (flags.Has("kv-cache-dtype")) s = "kv-cache-dtype=" + flags.GetOr("kv-cache-dtype", "");
  if (flags.Has("fp8-mma")) s += std::string(s.empty() ? "" : ",") + "fp8-mma";
  for (const FlagSpec& f : CudaFlagSpecs()) {
    if (!flags.Has(f.name)) continue;
    if (!s.empty()) s += ',';
    s += f.name;
    if (f.takes_value) {
      s += '=';
      s += flags.GetOr(f.name, "");
    }
  }
  return s;
}

std::vector<int64_t> ParseList(const std::string& s) {
  std::vector<int64_t> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) v.push_back(std::stoll(item));
  return v;
}

// Copy bandwidth in GB/s (bytes read + written), 2 GiB device-to-device, median of 10.
double MeasureCopyGBs() {
  const size_t bytes = size_t{2} << 30;
  gpu::DeviceBuffer a(bytes), b(bytes);
  gpu::Stream s;
  gpu::EventTimer t;
  std::vector<float> ms;
  for (int i = 0; i < 12; ++i) {
    t.Start(s.get());
    gpu::CopyDeviceToDevice(b.get(), a.get(), bytes, s.get());
    const float x = t.StopMs(s.get());
    if (i >= 2) ms.push_back(x);
  }
  std::sort(ms.begin(), ms.end());
  return 2.0 * bytes / (ms[ms.size() / 2] * 1e-3) / 1e9;
}

// Speculative verify steps at the slots' context: each sequence runs its last token and k drafts
// (one forward, eager, logits of every row), then rolls the k + 1 tokens back. Against a plain
// decode step (`decode_ms`, graph-replayed) and an eager forward of one token per sequence.
Status BenchVerify(CudaModel& m, const std::vector<int>& slots, const std::vector<int64_t>& ks,
                   int64_t steps, double decode_ms) {
  namespace mdl = model::deepseek_v4;
  const int64_t vocab = m.config().vocab_size;
  auto time_forward = [&](int64_t tokens) -> StatusOr<double> {
    std::vector<CudaModel::Chunk> chunks;
    for (size_t i = 0; i < slots.size(); ++i) {
      std::vector<int32_t> ids;
      for (int64_t t = 0; t < tokens; ++t)
        ids.push_back(static_cast<int32_t>((i * 31 + t * 7 + 5) % vocab));
      chunks.push_back({slots[i], ids});
    }
    std::vector<double> ms;
    for (int64_t s = 0; s < steps + 2; ++s) {
      const auto a = std::chrono::steady_clock::now();
      DSINFER_ASSIGN_OR_RETURN(auto lg, m.ForwardToDevice(chunks, mdl::LogitsRows::kAll));
      (void)lg;
      gpu::SynchronizeStream(m.stream());
      if (s >= 2)
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a)
                         .count());
      for (int slot : slots) DSINFER_RETURN_IF_ERROR(m.Rollback(slot, m.length(slot) - tokens));
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  };
  DSINFER_ASSIGN_OR_RETURN(const double eager1, time_forward(1));
  for (int64_t k : ks) {
    if (k < 1 || k > CudaModel::kMaxRollback - 1) return InvalidArgument("--verify: k in [1, 15]");
    DSINFER_ASSIGN_OR_RETURN(const double ms, time_forward(k + 1));
    std::printf(
        "{\"bench\": \"verify\", \"batch\": %zu, \"drafts\": %lld, \"step_ms\": %.3f, "
        "\"eager_decode_ms\": %.3f, \"decode_ms\": %.3f, \"ratio_to_eager_decode\": %.2f, "
        "\"ratio_to_decode\": %.2f}\n",
        slots.size(), static_cast<long long>(k), ms, eager1, decode_ms, ms / eager1,
        ms / decode_ms);
    std::fflush(stdout);
  }
  return Status::Ok();
}

// DSpark's draft pass at the slots' context: one block of dspark_block_size slots per sequence
// (CudaModel::DraftDSpark, graph-replayed unless --no-graph), against a plain decode step.
Status BenchDSpark(CudaModel& m, const std::vector<int>& slots, int64_t steps, double decode_ms) {
  std::vector<CudaModel::DSparkRequest> reqs;
  for (size_t i = 0; i < slots.size(); ++i) {
    reqs.push_back({{}, 0, slots[i], static_cast<int32_t>((i * 131 + 7) % m.config().vocab_size)});
  }
  std::vector<double> ms;
  for (int64_t s = 0; s < steps + 2; ++s) {  // the first two: warm-up (and graph capture)
    const auto a = std::chrono::steady_clock::now();
    DSINFER_ASSIGN_OR_RETURN(auto blocks, m.DraftDSpark(reqs));
    (void)blocks;
    if (s >= 2)
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(ms.begin(), ms.end());
  const double med = ms[ms.size() / 2];
  std::printf(
      "{\"bench\": \"dspark_draft\", \"batch\": %zu, \"block\": %d, \"stages\": %d, "
      "\"draft_ms\": %.3f, \"decode_ms\": %.3f, \"ratio_to_decode\": %.2f}\n",
      slots.size(), m.v41_config()->dspark_block_size, m.v41_config()->num_nextn_predict_layers,
      med, decode_ms, med / decode_ms);
  std::fflush(stdout);
  return Status::Ok();
}

// What a layer reads per decode token and computes per prefill token, for either family.
struct LayerCost {
  int rate = 0;             // one compressed entry per `rate` tokens (0: window only)
  bool selects = false;     // attends to the indexer's top-k of its entries (else all visible)
  bool scores = false;      // scores index keys (an indexer of its own)
  double score_limit = 0;   // > 0: keys scored at most (V4.1's candidate blocks)
  double extra_params = 0;  // compressor, indexer, Engram weights beyond the shared block
  double window_row = 0, entry_row = 0, key_row = 0;  // bytes of a compact cache row (spec §2.12)
};

std::vector<LayerCost> LayerCosts(const CudaModel& m) {
  const auto& c = m.config();
  const double D = c.hidden_size, d = c.head_dim, Id = c.index_head_dim;
  const double qlr = c.q_lora_rank, IH = c.index_n_heads;
  std::vector<LayerCost> out(static_cast<size_t>(c.num_layers));
  if (const io::DeepseekV41Config* v = m.v41_config()) {
    for (int l = 0; l < c.num_layers; ++l) {
      LayerCost& k = out[static_cast<size_t>(l)];
      k.rate = v->compress_ratios[l];
      k.selects = k.rate > 0;
      k.scores = v->IsIndexSource(l);
      if (k.scores && v->candidate_source_layer_id >= 0 && v->candidate_source_layer_id < l)
        k.score_limit = static_cast<double>(v->candidate_topk_blocks) * v->candidate_block_size;
      if (v->IsKvSource(l)) k.extra_params += (k.rate > 1 ? 2 : 1) * d * D + d * Id;
      if (k.scores) k.extra_params += qlr * IH * Id + IH * D;
      for (int e : v->engram_layer_ids) {
        if (e == l) {
          k.extra_params += static_cast<double>(v->engram_max_ngram_size - 1) * v->engram_n_heads *
                            v->engram_head_dim * (c.hc_mult + 1) * D;
        }
      }
      k.window_row = d + d / 32;     // FP8 + a scale byte per 32
      k.entry_row = d / 2 + d / 16;  // FP4 + an e4m3 scale per 16 (288 B at 512)
      k.key_row = Id / 2 + Id / 32;  // FP4 + a scale byte per 32
    }
    return out;
  }
  for (int l = 0; l < c.num_layers; ++l) {
    LayerCost& k = out[static_cast<size_t>(l)];
    k.rate = c.compress_ratios[l];
    k.selects = k.scores = k.rate == c.csa_rate;
    if (k.selects)
      k.extra_params = 2 * 2 * d * D + 2 * 2 * Id * D + qlr * IH * Id + IH * D;
    else if (k.rate != 0)
      k.extra_params = 2 * d * D;
    k.window_row = k.entry_row = 584;  // fp8_ds_mla
    k.key_row = 68;                    // e2m1 index keys
  }
  return out;
}

Status Run(const Flags& flags) {
  if (!gpu::DeviceAvailable()) return Unimplemented("dsinfer bench needs a CUDA device");
  const auto batches = ParseList(flags.GetOr("batches", "1,8,32,128,256"));
  DSINFER_ASSIGN_OR_RETURN(int64_t context, flags.GetInt("context", 4096));
  DSINFER_ASSIGN_OR_RETURN(int64_t prefill, flags.GetInt("prefill", 8192));
  DSINFER_ASSIGN_OR_RETURN(int64_t steps, flags.GetInt("steps", 20));
  DSINFER_ASSIGN_OR_RETURN(int64_t chunk, flags.GetInt("prefill-chunk", 0));
  if (chunk < 0) return InvalidArgument("--prefill-chunk must be >= 0");
  if (chunk == 0 || chunk > prefill) chunk = prefill;
  const bool graph = !flags.Has("no-graph");
  const double fp8_tflops = std::stod(flags.GetOr("fp8-tflops", "1311"));
  const int64_t max_batch = *std::max_element(batches.begin(), batches.end());

  CudaModelOptions opt;
  DSINFER_RETURN_IF_ERROR(ApplyCudaFlags(flags, &opt));
  opt.fp8_mma = flags.Has("fp8-mma");
  DSINFER_ASSIGN_OR_RETURN(opt.kv_cache_dtype,
                           io::ParseKvCacheDtype(flags.GetOr("kv-cache-dtype", "auto")));
  opt.max_seqs = static_cast<int>(std::max<int64_t>(max_batch, 1));
  opt.max_len = std::max(context + steps + 8, prefill) + 8 + CudaModel::kMaxRollback;
  opt.max_tokens = std::max(max_batch, chunk);
  opt.all_logits = false;
  if (flags.Has("verify")) {  // verify steps: up to 16 rows per sequence, every row's logits
    opt.max_tokens = std::max(opt.max_tokens, max_batch * CudaModel::kMaxRollback);
    opt.logits_per_seq = CudaModel::kMaxRollback;
  }
  const bool dspark = flags.Has("dspark");
  if (dspark) {  // a block of at most kMaxRollback slots per sequence
    opt.dspark = true;
    opt.max_tokens = std::max(opt.max_tokens, max_batch * CudaModel::kMaxRollback);
  }
  opt.graphs = graph;
  const std::string preset = flags.GetOr("preset", "flash-l8");
  std::unique_ptr<CudaModel> m;
  const auto t0 = std::chrono::steady_clock::now();
  if (auto dir = flags.Get("model")) {
    DSINFER_ASSIGN_OR_RETURN(m, CudaModel::Load(*dir, opt));
  } else if (preset.rfind("v41-", 0) == 0) {
    DSINFER_ASSIGN_OR_RETURN(auto cfg, model::deepseek_v41::PresetConfig(preset));
    if (dspark && cfg.num_nextn_predict_layers == 0) cfg.num_nextn_predict_layers = 3;
    DSINFER_ASSIGN_OR_RETURN(m, CudaModel::CreateRandomV41(cfg, 1, opt));
  } else {
    DSINFER_ASSIGN_OR_RETURN(auto cfg, model::deepseek_v4::PresetConfig(preset));
    DSINFER_ASSIGN_OR_RETURN(m, CudaModel::CreateRandom(cfg, 1, opt));
  }
  const std::vector<LayerCost> costs = LayerCosts(*m);
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto& c = m->config();
  const double bw = MeasureCopyGBs();
  std::printf(
      "{\"bench\": \"setup\", \"device\": \"%s\", \"weights\": \"%s\", \"weight_bytes\": %zu, "
      "\"load_s\": %.1f, \"copy_GBps\": %.0f, \"graph\": %s, \"switches\": \"%s\"}\n",
      gpu::DeviceDescription().c_str(),
      flags.Has("model") ? flags.Get("model")->c_str() : preset.c_str(), m->weight_bytes(), load_s,
      bw, graph ? "true" : "false", SwitchesSet(flags).c_str());
  std::fflush(stdout);

  // ---- decode ----
  for (int64_t B : batches) {
    std::vector<int> slots;
    for (int64_t i = 0; i < B; ++i) {
      DSINFER_ASSIGN_OR_RETURN(int s, m->NewSequence());
      DSINFER_RETURN_IF_ERROR(m->FillSyntheticState(s, context, 1234 + i));
      slots.push_back(s);
    }
    std::vector<int32_t> ids(static_cast<size_t>(B));
    for (int64_t i = 0; i < B; ++i) ids[i] = static_cast<int32_t>((i * 7919 + 17) % c.vocab_size);
    for (int w = 0; w < 3; ++w) {  // warm-up (and graph capture)
      DSINFER_ASSIGN_OR_RETURN(ids, m->DecodeStep(slots, ids, graph));
    }
    if (flags.Has("profile-step")) {
      // One step inside a profiler range, for `ncu --profile-from-start off` (per-kernel times).
      backend::cuda::ProfilerStart();
      DSINFER_ASSIGN_OR_RETURN(ids, m->DecodeStep(slots, ids, graph));
      backend::cuda::ProfilerStop();
    }
    std::vector<double> ms;
    double experts_used = 0;
    for (int64_t s = 0; s < steps; ++s) {
      const auto a = std::chrono::steady_clock::now();
      DSINFER_ASSIGN_OR_RETURN(ids, m->DecodeStep(slots, ids, graph));
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
      for (int v : m->LastActiveExperts()) experts_used += v;
    }
    experts_used /= static_cast<double>(steps);
    std::sort(ms.begin(), ms.end());
    const double med = ms[ms.size() / 2];
    // Bytes per step: weights read once, routed experts actually used, and the state each token reads.
    const double L = static_cast<double>(context + 3 + steps / 2);
    double state = 0, state_compact = 0;
    const double d = c.head_dim, Id = c.index_head_dim;
    for (const LayerCost& k : costs) {
      const double win = std::min<double>(c.sliding_window, L);
      double entry_rows = 0, idx_rows = 0;
      if (k.rate != 0) {
        const double vis = std::floor(L / k.rate);
        entry_rows = k.selects ? std::min<double>(c.index_topk, vis) : vis;
        if (k.scores) idx_rows = k.score_limit > 0 ? std::min(vis, k.score_limit) : vis;
      }
      state += B * ((win + entry_rows) * d * 4 + idx_rows * Id * 4);  // fp32 rows on the GPU
      state_compact += B * (win * k.window_row + entry_rows * k.entry_row + idx_rows * k.key_row);
    }
    // DeepSeek-V4's FP8 cache: the GPU holds the packed rows themselves.
    if (m->v41_config() == nullptr && c.kv_cache_dtype == io::KvCacheDtype::kFp8)
      state = state_compact;
    const double weights = static_cast<double>(m->dense_weight_bytes_per_step()) +
                           experts_used * static_cast<double>(m->expert_bytes()) + B * c.hidden_size * 2.0;
    const double bound_ms = (weights + state) / (bw * 1e9) * 1e3;
    const double bound_compact_ms = (weights + state_compact) / (bw * 1e9) * 1e3;
    std::printf("{\"bench\": \"decode\", \"batch\": %lld, \"context\": %lld, \"step_ms\": %.3f, "
                "\"tok_per_s\": %.0f, \"weight_GB\": %.3f, \"experts_per_step\": %.1f, \"state_GB\": %.3f, "
                "\"bound_ms\": %.3f, \"ratio_to_bound\": %.2f, \"bound_compact_state_ms\": %.3f, "
                "\"min_ms\": %.3f}\n",
                static_cast<long long>(B), static_cast<long long>(context), med, B / med * 1e3,
                weights / 1e9, experts_used, state / 1e9, bound_ms, med / bound_ms, bound_compact_ms, ms[0]);
    std::fflush(stdout);
    {
      std::string prof = "{\"bench\": \"decode_profile_eager\", \"batch\": " + std::to_string(B);
      double total = 0;
      for (const auto& [name, ms_op] : m->ProfileDecodeStep(slots, ids)) {
        char buf[96];
        std::snprintf(buf, sizeof(buf), ", \"%s_ms\": %.3f", name.c_str(), ms_op);
        prof += buf;
        total += ms_op;
      }
      std::printf("%s, \"total_ms\": %.3f}\n", prof.c_str(), total);
      std::fflush(stdout);
    }
    if (auto list = flags.Get("verify")) {
      DSINFER_RETURN_IF_ERROR(BenchVerify(*m, slots, ParseList(*list), steps, med));
    }
    if (dspark) DSINFER_RETURN_IF_ERROR(BenchDSpark(*m, slots, steps, med));
    for (int s : slots) m->FreeSequence(s);
  }

  // ---- prefill ----
  if (prefill > 0) {
    DSINFER_ASSIGN_OR_RETURN(int s, m->NewSequence());
    std::vector<int32_t> ids(static_cast<size_t>(prefill));
    for (int64_t i = 0; i < prefill; ++i) ids[i] = static_cast<int32_t>((i * 104729 + 3) % c.vocab_size);
    // A fresh sequence in s with the prompt's tokens [0, end) prefilled, chunk by chunk; the
    // forwards' wall time into *seconds.
    auto prefill_to = [&](int64_t end, double* seconds) -> Status {
      m->FreeSequence(s);
      DSINFER_ASSIGN_OR_RETURN(s, m->NewSequence());
      const auto a = std::chrono::steady_clock::now();
      for (int64_t b = 0; b < end; b += chunk) {
        const std::vector<int32_t> part(ids.begin() + b, ids.begin() + std::min(end, b + chunk));
        DSINFER_ASSIGN_OR_RETURN(auto lg,
                                 m->Forward({{s, part}}, model::deepseek_v4::LogitsRows::kLast));
      }
      *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
      return Status::Ok();
    };
    double best = 1e30, seconds = 0;
    for (int rep = 0; rep < 2; ++rep) {
      DSINFER_RETURN_IF_ERROR(prefill_to(prefill, &seconds));
      best = std::min(best, seconds);
    }
    // Device memory in use after the prefill (the model's weights, activations sized for the chunk
    // and state, all allocated up front; and whatever other processes hold).
    const int64_t used_bytes = static_cast<int64_t>(gpu::DeviceTotalBytes()) -
                               static_cast<int64_t>(gpu::DeviceFreeBytes());
    // FLOPs: 2 x (dense weights + K routed experts) per token, + attention core + indexer (spec §5).
    const double D = c.hidden_size, H = c.num_heads, d = c.head_dim, I = c.moe_intermediate_size;
    const double qlr = c.q_lora_rank, G = c.o_groups, olr = c.o_lora_rank;
    double per_token = 0, attn = 0;
    for (const LayerCost& k : costs) {
      double params = D * qlr + qlr * H * d + D * d + H * d * olr + G * olr * D;  // attention
      params += 3 * D * I * (c.num_experts_per_tok + c.n_shared_experts) + c.n_routed_experts * D;
      params += k.extra_params;
      per_token += 2 * params;
      for (int64_t t = 0; t < prefill; ++t) {
        double keys = std::min<double>(c.sliding_window, t + 1);
        if (k.rate != 0) {
          const double vis = static_cast<double>((t + 1) / k.rate);
          keys += k.selects ? std::min<double>(c.index_topk, vis) : vis;
          if (k.scores) {
            const double scored = k.score_limit > 0 ? std::min(vis, k.score_limit) : vis;
            attn += 2.0 * c.index_n_heads * c.index_head_dim * scored;
          }
        }
        attn += 4 * H * d * keys;
      }
    }
    per_token += 2 * D * c.vocab_size / prefill;  // one logits row
    const double flops = per_token * prefill + attn;
    const double bound_s = flops / (fp8_tflops * 1e12);
    std::printf(
        "{\"bench\": \"prefill\", \"tokens\": %lld, \"chunk\": %lld, \"seconds\": %.3f, "
        "\"tok_per_s\": %.0f, \"tflop\": %.2f, \"achieved_tflops\": %.2f, \"bound_s\": %.4f, "
        "\"ratio_to_bound\": %.1f, \"device_used_bytes\": %lld}\n",
        static_cast<long long>(prefill), static_cast<long long>(chunk), best, prefill / best,
        flops / 1e12, flops / best / 1e12, bound_s, best / bound_s,
        static_cast<long long>(used_bytes));
    std::fflush(stdout);
    // Where the time goes: the last chunk once more, eager and serial, with marks (after the
    // chunks before it, unprofiled: a long prompt's last chunk shows what its context costs).
    {
      const int64_t last = (prefill - 1) / chunk * chunk;
      DSINFER_RETURN_IF_ERROR(prefill_to(last, &seconds));
      const std::vector<int32_t> tail(ids.begin() + last, ids.end());
      char head[128];
      std::snprintf(head, sizeof(head),
                    "{\"bench\": \"prefill_profile_eager\", \"tokens\": %lld, \"position\": %lld",
                    static_cast<long long>(tail.size()), static_cast<long long>(last));
      std::string prof = head;
      double total = 0;
      for (const auto& [name, ms_op] : m->ProfileForward({{s, tail}})) {
        char buf[96];
        std::snprintf(buf, sizeof(buf), ", \"%s_ms\": %.3f", name.c_str(), ms_op);
        prof += buf;
        total += ms_op;
      }
      std::printf("%s, \"total_ms\": %.3f}\n", prof.c_str(), total);
    }
    m->FreeSequence(s);
  }
  return Status::Ok();
}

}  // namespace

int RunBench(int argc, char** argv) {
  const std::vector<FlagSpec> specs = Specs();
  auto flags = Flags::Parse(argc, argv, 2, specs);
  if (!flags.ok()) {
    std::fprintf(stderr, "dsinfer bench: %s\n", flags.status().message().c_str());
    return 2;
  }
  if (flags->help()) {
    std::printf("%s", Usage("bench", "Benchmarks the CUDA model (JSON lines).", specs).c_str());
    return 0;
  }
  Status st = Run(*flags);
  if (!st.ok()) {
    std::fprintf(stderr, "dsinfer bench: %s\n", st.ToString().c_str());
    return st.code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  return 0;
}

}  // namespace dsinfer::cli
