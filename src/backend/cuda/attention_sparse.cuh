// Sparse MQA attention of V4 (spec §2.5, §2.9) for prefill and decode rows alike: each query row t
// (position p) attends with all H heads to one shared list of 512-dim K=V rows
//   window:      positions max(0, p-W+1) .. p   (this call's kv rows, older ones from the ring)
//   compressed:  CSA: the indexer's selection; HCA: every entry w < (p+1)/rate; SWA: none
// with a per-head sink logit in the softmax denominator, then the inverse RoPE of the output's
// trailing rope dims at the query position. fp32 logits, online softmax and accumulation. The
// query's per-head RMSNorm and RoPE can be applied here (q_norm_eps >= 0) instead of by a kernel
// of their own. Deterministic: each (row, head) is computed by 16 warps that take spans of 4 keys
// round robin, and are combined in warp order, so results do not depend on the batch or the
// schedule; a block owns one row's 1, 2 or 4 heads (a launch choice that never changes a bit: its
// warps run each head's spans in turn, loading each span's keys once for all of them).
#pragma once

#include <cstdint>

#include "backend/cuda/runtime.h"
#include "backend/cuda/token_meta.cuh"
#include "backend/quant_codec.h"
#include "base/status.h"

namespace dsinfer::backend::cuda {

struct SparseAttentionParams {
  TokenMeta meta;
  const float* q = nullptr;      // [n, heads, dim] (per-head RMSNorm + RoPE applied, unless
  float q_norm_eps = -1.0f;      //  q_norm_eps >= 0: then applied here, RMSNorm eps q_norm_eps)
  bool q_rope = false;           // q_norm_eps < 0: the RoPE alone applied here (DeepSeek-V4.1)
  const float* kv = nullptr;     // [n, dim] this call's K=V rows (RMSNorm + RoPE applied)
  RingRef window;                // earlier K=V rows by position (width dim)
  ListRef comp;                  // compressed entries (width dim); data null for window-only layers
  const int32_t* sel = nullptr;  // CSA: [n, sel_stride] selected entries; null: all visible (HCA)
  const int32_t* sel_count = nullptr;  // CSA: [n]
  int sel_stride = 0;
  int rate = 0;         // 0: window only
  int window_size = 0;  // W
  int heads = 0;
  int dim = 0;                  // <= 512
  const float* sink = nullptr;  // [heads]
  float scale = 0;              // dim^-0.5
  int rope_dim = 0;
  const float* inv_freq = nullptr;  // [rope_dim / 2] for the inverse RoPE of the output
  float* out = nullptr;             // [n, heads, dim]
  // Optional: out's rows also act_quant'ed (the FP8/FP4 linears' input quantization: e4m3 as f16,
  // one power-of-two scale per 128 columns of a token's heads * dim; dim % 128 == 0), for the
  // output projection: out_q [n, out_ldq], out_s [n, out_lds].
  uint16_t* out_q = nullptr;
  int64_t out_ldq = 0;
  float* out_s = nullptr;
  int64_t out_lds = 0;
  // Or the same in the FP8-instruction mode's form (QuantizedRows::c / cs: e4m3 codes out_c [n,
  // out_ldc], out_ldc >= heads * dim a multiple of 16; the scales transposed,
  // out_cs[(column / 128) * out_ldcs + row], out_ldcs >= n; dim % 128 == 0), for its output
  // projection: then `out` is not written.
  uint8_t* out_c = nullptr;
  int64_t out_ldc = 0;
  float* out_cs = nullptr;
  int64_t out_ldcs = 0;
  // Heads per block (1, 2 or 4; must divide heads, else halved): never changes a result. 0: the
  // KernelOptions choice (attention_heads_per_block, else by rows).
  int heads_per_block = 0;
  // The tensor-core variant (LaunchSparseAttentionTc: as batch-invariant, other bits than the
  // CUDA-core kernel): 1 on where SparseAttentionTcSupports (else the CUDA-core kernel), -1 off,
  // 0: KernelOptions::AttentionTcFor(kv_bf16).
  int tensor_cores = 0;
  // The tensor-core kernel's split of a row's key chunks over blocks (each chunk's partial softmax
  // into tc_workspace, then a combine kernel folding them in chunk order): the same bits as one
  // block folding them in turn, so a pure launch choice. 0: for a few rows with many chunks
  // (SparseAttentionTcWillSplit: a few decode rows), 1: always, -1: never; either way only where
  // tc_workspace holds SparseAttentionTcSplitFloats(*this) floats.
  int tc_split = 0;
  // Unsplit rows of DeepSeek-V4's FP8 cache (qp_bf16 over packed rows, at most 64 heads, head_dim
  // 256 or 512; other shapes take the per-tile blocks whatever this says): one block per row for
  // every 16-head tile (SparseAttentionTcRowKernel: each chunk's keys fetched and decoded once per
  // row, not once per tile) instead of a block per tile; the same bits, so a pure launch choice.
  // 0: from KernelOptions::attention_tc_row_min_rows rows at four head tiles (49 to 64 heads), 1:
  // always, -1: never.
  int tc_row = 0;
  // Every K=V value this call reads (kv, the window ring, the compressed entries) is a bf16 value
  // (DeepSeek-V4's FP8 cache rounds them so): the tensor-core kernel then skips the part products
  // of the keys' / values' parts 2 and 3, exact zeros, for the same bits in half the mma steps
  // (gpu_attention_tc_test checks the bits). False for values that are not.
  bool kv_bf16 = false;
  // DeepSeek-V4's FP8-cache attention in the official kernel's precision (spec §2.5: bf16 inputs,
  // P cast to bf16 for P V): the queries rounded to bf16 and each key chunk's softmax weights
  // rounded to bf16 relative to the chunk's max, as the CPU's AttendHeadBf16 defines it (the
  // chunks of backend/softmax_fold.h). Only the tensor-core kernel computes it (one mma per k step
  // where the fp32 operands take three); needs kv_bf16 and its shapes (head_dim % 64 == 0).
  bool qp_bf16 = false;
  // The FP8 cache's packed K=V rows (backend/quant_codec.h's qc::PackedRow; q == 0: fp32 rows of
  // dim floats): kv, the window ring and the compressed entries all hold rows of
  // kv_format.floats() floats, decoded as read (packed_row.cuh: the CPU's Unpack values, so the
  // results are those of the same values unpacked). Every value is then a bf16 value: set
  // kv_bf16 too.
  qc::PackedRow kv_format;
  // Floats from one K=V row of kv to the next.
  DSINFER_QC_FN int64_t kv_row_floats() const {
    return kv_format.packed() ? kv_format.floats() : dim;
  }
  float* tc_workspace = nullptr;
  int64_t tc_workspace_floats = 0;
  // The row block's pre-decoded K=V rows (LaunchRowKeysDecode's output), each dim bf16 values in
  // S's position order (attention_sparse_tc_row_sm90.cu): rows [0, n) this call's K=V rows by
  // batch row, row n + b + e the compressed entry e of the sequence whose first batch row is b.
  // The row block then copies a chunk's keys as they are instead of decoding its packed rows (the
  // same bits). Only for calls whose every row has seg_start 0 (a sequence starting at position
  // 0 in this call: no ring rows before the call, and every entry a row reads, e < (pos + 1) /
  // rate, below the sequence's row count): the caller's contract. Only the row block reads it;
  // null: the row block decodes as it goes.
  const uint16_t* keys16 = nullptr;
  // Unimplemented naming the limit when the kernel cannot take these shapes.
  Status Validate() const;
};
void LaunchSparseAttention(const SparseAttentionParams& p, StreamHandle stream);

// The same attention on the tensor cores (attention_sparse_tc_sm90.cu; issue 27). Per row, a block
// per 16 heads computes S = Q K^T and O = P V with mma.sync m16n8k16 bf16 on fp32 values split
// exactly into three bf16 parts (x = x1 + x2 + x3), keeping the six partial products of order
// <= 2 (i + j <= 4 of parts 1..3): every kept product is exact in fp32 and the dropped ones are
// below 2^-23 |x||y|. Keys in fixed chunks of 32, each chunk's softmax partial (its max, sum and
// P V) folded into the row's running one in chunk order, by the same block or (tc_split) by a
// combine kernel over per-chunk blocks; each output's operation sequence is a function of
// (heads, dim, the row's key list) only, so a row has the same bits alone or in any batch, split
// or not. Not the CUDA-core kernel's bits (an opt-in: --attention-tc, the default where the K=V
// values are bf16 values, and the only kernel of qp_bf16). Takes head_dim % 64 == 0 (<= 512) and
// any head count (a last partial tile of 16 is padded).
bool SparseAttentionTcSupports(const SparseAttentionParams& p);
void LaunchSparseAttentionTc(const SparseAttentionParams& p, StreamHandle stream);
// The most key chunks a row of these params can reach (window + selection stride or the list's
// capacity), and the workspace floats a split launch of its rows needs.
int64_t SparseAttentionTcMaxChunks(const SparseAttentionParams& p);
int64_t SparseAttentionTcSplitFloats(const SparseAttentionParams& p);
// Whether LaunchSparseAttentionTc splits these rows' chunks over blocks (tc_split, the rows, the
// workspace): a launch choice, never a result.
bool SparseAttentionTcWillSplit(const SparseAttentionParams& p);
// Launches of the row block so far in this process (tests check that it ran); of those, the ones
// that read pre-decoded keys (SparseAttentionParams::keys16).
int64_t SparseAttentionTcRowLaunches();
int64_t SparseAttentionTcRowPrepassLaunches();
// Whether LaunchSparseAttention runs these params' rows on the FP8 cache's row block (qp_bf16, its
// shapes, unsplit: RowBlockFor): the calls that keys16 can serve.
bool SparseAttentionTakesRowBlock(const SparseAttentionParams& p);
// The row block's key pre-pass: decodes every K=V row of the call (by batch row) and, with
// compressed entries (rate > 0), every entry e < (pos + 1) / rate of each sequence's last row
// (row n + seg_begin + e) into keys16 (at least 2 n dim bf16): SparseAttentionParams::keys16's
// layout and contract (every row's seg_start 0). Packed qp_bf16 rows only.
void LaunchRowKeysDecode(const SparseAttentionParams& p, uint16_t* keys16, StreamHandle stream);

}  // namespace dsinfer::backend::cuda
