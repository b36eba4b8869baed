#include "cli/cuda_flags.h"

#include <sstream>
#include <string>

namespace dsinfer::cli {

std::vector<FlagSpec> CudaFlagSpecs() {
  return {
      {"no-pdl", "launch without programmatic dependent launch (plain stream order)", false},
      {"no-branches", "run every kernel on one stream (no branch streams)", false},
      {"gemv", "weight formats that take the decode GEMV: f32,bf16 (default) or none"},
      {"no-gemv-dual", "no fused SwiGLU pair in the decode GEMV", false},
      {"qlinear-warps", "warps per FP8/FP4 block for few rows, 1..16 (default: by shape)"},
      {"qgemm-min-rows",
       "dense FP8 linears of at least this many rows take the tiled GEMM (the same bits; default "
       "128; 0: off)"},
      {"qgemm-expert-min-rows",
       "routed experts with at least this many rows per expert take the tiled GEMM (the same bits; "
       "default 32; 0: off)"},
      {"qexpert-rows-min-slots",
       "routed FP4 experts at few rows per expert over at least this many expert slots take the "
       "row-tile kernel (the same bits; default 64; 0: off)"},
      {"qgemm-mma",
       "the tiled GEMM's tensor-core instruction: wgmma (warpgroup MMA) or sync (mma.sync); the "
       "same bits either way (default: wgmma)"},
      {"no-tc-bf16",
       "the bf16 linears (the head, the compressors, the router gate, V4.1's Engram projection) "
       "on CUDA cores instead of the tensor cores (other logits bits)",
       false},
      {"no-tc-gate",
       "with the bf16 linears on the tensor cores, the MoE router's gate on the CUDA cores (other "
       "router-logit bits)",
       false},
      {"engram-host-tables",
       "DeepSeek-V4.1: the Engram tables in pinned host memory, read over PCIe by the lookup (the "
       "release's tables do not fit a GPU; the same bits)",
       false},
      {"attention-heads-per-block",
       "sparse attention heads per block, 1, 2 or 4 (the same bits; default: 4 from 64 rows, else "
       "1)"},
      {"attention-tc-row-min-rows",
       "the FP8 cache's tensor-core attention takes one block per row for its 64 heads from this "
       "many rows (the same bits; default 128; 0: off)"},
      {"attention-row-pv",
       "the FP8 cache's row-block attention's P V instruction: wgmma (warpgroup MMA) or sync "
       "(mma.sync); the same bits either way (default: wgmma)"},
      {"attention-row-prepass",
       "the FP8 cache's row-block attention reads keys decoded once per call by a pre-pass where "
       "every sequence of the forward starts at position 0 (the same bits; default: off)",
       false},
      {"attention-tc",
       "sparse attention on the tensor cores (fp32-accurate split bf16 operands, batch-invariant; "
       "other bits than the CUDA-core kernel; always with --kv-cache-dtype fp8, whose bf16 "
       "queries and weights only it computes)",
       false},
      {"no-attention-tc",
       "sparse attention on the CUDA cores where the numerics allow (not DeepSeek-V4's "
       "--kv-cache-dtype fp8 attention: bf16 queries and weights, the tensor cores only)",
       false},
      {"no-fp8mma-ws-experts",
       "with --fp8-mma: the routed experts at many rows an expert on the gather tile instead of "
       "the warp-specialized one (the same bits; an A/B choice)",
       false},
      {"no-fp8mma-tma-experts",
       "with --fp8-mma: the warp-specialized routed experts' tokens loaded by its producer "
       "warpgroup instead of gathered into list order and fed by the TMA (the same bits; an A/B "
       "choice)",
       false},
      {"no-fp8mma-wide-experts",
       "with --fp8-mma: the TMA-fed FP4 routed experts' token tiles 128 wide instead of 192 (the "
       "same bits; an A/B choice)",
       false},
      {"indexer-tc-min-rows",
       "DeepSeek-V4's --kv-cache-dtype fp8: indexer chunks of at least this many tokens score on "
       "the tensor cores (the same bits; default 1; 0: off)"},
  };
}

Status ApplyCudaFlags(const Flags& flags, model::deepseek_v4::cuda::CudaModelOptions* options) {
  backend::cuda::KernelOptions k;
  k.pdl = !flags.Has("no-pdl");
  k.gemv_dual = !flags.Has("no-gemv-dual");
  if (auto g = flags.Get("gemv")) {
    k.gemv_f32 = k.gemv_bf16 = false;
    if (*g != "none") {
      std::stringstream ss(*g);
      std::string item;
      while (std::getline(ss, item, ',')) {
        if (item == "f32") {
          k.gemv_f32 = true;
        } else if (item == "bf16") {
          k.gemv_bf16 = true;
        } else {
          return InvalidArgument("--gemv takes f32, bf16 (comma-separated) or none, not \"" + *g +
                                 "\"");
        }
      }
    }
  }
  DSINFER_ASSIGN_OR_RETURN(int64_t warps, flags.GetInt("qlinear-warps", 0));
  if (warps < 0 || warps > 16) {
    return InvalidArgument("--qlinear-warps must be 1..16, not " + std::to_string(warps));
  }
  k.qlinear_warps = static_cast<int>(warps);
  DSINFER_ASSIGN_OR_RETURN(
      k.qgemm_min_rows,
      flags.GetInt("qgemm-min-rows", backend::cuda::KernelOptions{}.qgemm_min_rows));
  if (k.qgemm_min_rows < 0) return InvalidArgument("--qgemm-min-rows must be >= 0");
  DSINFER_ASSIGN_OR_RETURN(
      k.qgemm_expert_min_rows,
      flags.GetInt("qgemm-expert-min-rows", backend::cuda::KernelOptions{}.qgemm_expert_min_rows));
  if (k.qgemm_expert_min_rows < 0) return InvalidArgument("--qgemm-expert-min-rows must be >= 0");
  DSINFER_ASSIGN_OR_RETURN(int64_t rows_slots,
                           flags.GetInt("qexpert-rows-min-slots",
                                        backend::cuda::KernelOptions{}.qexpert_rows_min_slots));
  if (rows_slots < 0 || rows_slots > (int64_t{1} << 20))
    return InvalidArgument("--qexpert-rows-min-slots must be in [0, 2^20]");
  k.qexpert_rows_min_slots = static_cast<int>(rows_slots);
  if (auto m = flags.Get("qgemm-mma")) {
    if (*m != "wgmma" && *m != "sync")
      return InvalidArgument("--qgemm-mma takes wgmma or sync, not \"" + *m + "\"");
    k.qgemm_wgmma = *m == "wgmma";
  }
  DSINFER_ASSIGN_OR_RETURN(int64_t heads, flags.GetInt("attention-heads-per-block", 0));
  if (heads != 0 && heads != 1 && heads != 2 && heads != 4) {
    return InvalidArgument("--attention-heads-per-block must be 1, 2 or 4, not " +
                           std::to_string(heads));
  }
  k.attention_heads_per_block = static_cast<int>(heads);
  DSINFER_ASSIGN_OR_RETURN(k.attention_tc_row_min_rows,
                           flags.GetInt("attention-tc-row-min-rows",
                                        backend::cuda::KernelOptions{}.attention_tc_row_min_rows));
  if (auto m = flags.Get("attention-row-pv")) {
    if (*m != "wgmma" && *m != "sync")
      return InvalidArgument("--attention-row-pv takes wgmma or sync, not \"" + *m + "\"");
    k.attention_row_pv_wgmma = *m == "wgmma";
  }
  k.attention_row_prepass = flags.Has("attention-row-prepass");
  if (k.attention_tc_row_min_rows < 0)
    return InvalidArgument("--attention-tc-row-min-rows must be >= 0");
  if (flags.Has("attention-tc") && flags.Has("no-attention-tc"))
    return InvalidArgument("give at most one of --attention-tc and --no-attention-tc");
  using AttentionTc = backend::cuda::KernelOptions::AttentionTc;
  k.attention_tc = flags.Has("attention-tc")      ? AttentionTc::kOn
                   : flags.Has("no-attention-tc") ? AttentionTc::kOff
                                                  : AttentionTc::kAuto;
  DSINFER_ASSIGN_OR_RETURN(
      k.indexer_tc_min_rows,
      flags.GetInt("indexer-tc-min-rows", backend::cuda::KernelOptions{}.indexer_tc_min_rows));
  if (k.indexer_tc_min_rows < 0) return InvalidArgument("--indexer-tc-min-rows must be >= 0");
  k.fp8mma_ws_experts = !flags.Has("no-fp8mma-ws-experts");
  k.fp8mma_tma_experts = !flags.Has("no-fp8mma-tma-experts");
  k.fp8mma_wide_experts = !flags.Has("no-fp8mma-wide-experts");
  backend::cuda::SetKernelOptions(k);
  options->branches = !flags.Has("no-branches");
  options->tc_bf16 = !flags.Has("no-tc-bf16");
  options->tc_gate = !flags.Has("no-tc-gate");
  options->engram_host_tables = flags.Has("engram-host-tables");
  return Status::Ok();
}

}  // namespace dsinfer::cli
