// The work plan of the streamed FP8/FP4 decode linear (qlinear_stream_sm90.cu), internal to
// backend/cuda: which 16-row weight tile ("unit"), k slice and chunk each warp of each block
// computes, in which order. Plain C++ (no CUDA headers) so that the CPU tests can walk the same
// sequences the kernel walks (tests/unit/qlinear_stream_plan_test.cc).
//
// The kernel is persistent: block b of G takes units b, b + G, b + 2G, ... (its unit list), UB of
// them per round. A round's items are (unit of the round, k slice): UB * S of them, item i = unit
// i / S of the round, slice i % S; warp w of W takes items w, w + W, ... Each item's slice is
// streamed through the warp's shared-memory ring in chunks of up to CP k pairs (64 columns each),
// and every warp issues its own chunk copies `stages` chunks ahead of the one it computes, across
// items and rounds. Both the warp's copy issuer and its consumer walk one sequence: the chunks of
// its valid items in (round, item, chunk) order (PlanCursor).
//
// A unit is valid when it exists (index < units) and, for routed experts, its token tile holds
// tokens (Valid callback): expert units are (token tile, slot, row tile), row tile fastest.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define DSINFER_HD __host__ __device__ __forceinline__
#else
#define DSINFER_HD inline
#endif

namespace dsinfer::backend::cuda::qstream {

struct Plan {
  int warps = 0;            // W: warps per block
  int slices = 0;           // S: k slices per unit
  int slice_pairs = 0;      // k pairs of a full slice (the kernel's kP)
  int last_pairs = 0;       // k pairs of the last slice (1..slice_pairs)
  int chunk_pairs = 0;      // CP: k pairs per streamed chunk (even; divides slice_pairs)
  int units_per_round = 1;  // UB
  int stages = 0;           // chunks in flight per warp (ring depth)
  int grid = 0;             // G: blocks
};

// Units a round takes: one when the slices fill the warps, else as many as fit side by side.
DSINFER_HD int UnitsPerRound(int slices, int warps) { return slices >= warps ? 1 : warps / slices; }
DSINFER_HD int ItemsPerRound(const Plan& p) { return p.units_per_round * p.slices; }
DSINFER_HD int PairsOfSlice(const Plan& p, int s) {
  return s + 1 == p.slices ? p.last_pairs : p.slice_pairs;
}
DSINFER_HD int ChunksOfSlice(const Plan& p, int s) {
  return (PairsOfSlice(p, s) + p.chunk_pairs - 1) / p.chunk_pairs;
}
// Rounds of block b over `units` units (every warp of the block runs all of them).
DSINFER_HD int RoundsOf(const Plan& p, int64_t units, int block) {
  if (units <= block) return 0;
  const int64_t listed = (units - block + p.grid - 1) / p.grid;
  return static_cast<int>((listed + p.units_per_round - 1) / p.units_per_round);
}
// The unit of item i of round r of block b (may be >= units in the last round).
DSINFER_HD int64_t UnitOf(const Plan& p, int block, int round, int item) {
  return block + (static_cast<int64_t>(round) * p.units_per_round + item / p.slices) * p.grid;
}

// A position in one warp's chunk sequence: round, the warp's item ordinal j (item warp + W * j),
// chunk of the item's slice. done: past the last chunk.
struct PlanCursor {
  int round = 0, j = 0, chunk = 0;
  bool done = false;
  DSINFER_HD int item(const Plan& p, int warp) const { return warp + p.warps * j; }
};

// From (round, j) on, the first valid item (chunk 0 of it); done when none is left.
template <typename Valid>
DSINFER_HD void SeekItem(const Plan& p, int64_t units, int block, int warp, PlanCursor& c,
                         int rounds, const Valid& valid) {
  c.chunk = 0;
  while (c.round < rounds) {
    const int i = c.item(p, warp);
    if (i >= ItemsPerRound(p)) {
      ++c.round;
      c.j = 0;
      continue;
    }
    const int64_t u = UnitOf(p, block, c.round, i);
    if (u < units && valid(u)) return;
    ++c.j;
  }
  c.done = true;
}

template <typename Valid>
DSINFER_HD PlanCursor FirstChunk(const Plan& p, int64_t units, int block, int warp, int rounds,
                                 const Valid& valid) {
  PlanCursor c;
  SeekItem(p, units, block, warp, c, rounds, valid);
  return c;
}

template <typename Valid>
DSINFER_HD void NextChunk(const Plan& p, int64_t units, int block, int warp, PlanCursor& c,
                          int rounds, const Valid& valid) {
  if (c.done) return;
  const int slice = c.item(p, warp) % p.slices;
  if (++c.chunk < ChunksOfSlice(p, slice)) return;
  ++c.j;
  SeekItem(p, units, block, warp, c, rounds, valid);
}

// Host planning: W warps, the ring depth from a shared-memory budget, the grid from the unit
// count and the resident blocks.
struct PlanInput {
  int slices = 0, slice_pairs = 0, last_pairs = 0, chunk_pairs = 0;
  int64_t stage_bytes = 0;  // one ring stage (a full chunk of every matrix, with FP4 scales)
  int warps = 8;
  int64_t ring_budget = 0;  // bytes for the whole block's ring
  int min_stages = 2, max_stages = 6;
};

inline int64_t AlignUp(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

// The block's dynamic shared memory: [staged rows][partials: 2 rounds x items x matrices x 128
// f32 (16-byte aligned)][ring: warps x stages x stage_bytes (128-byte aligned)][mbarriers: warps
// x stages x 8 bytes].
struct Layout {
  int64_t red_off = 0, ring_off = 0, bar_off = 0, bytes = 0;
};
inline int64_t PartialBytes(int items, int matrices) {
  return 2 * int64_t{items} * matrices * 128 * 4;
}
inline Layout MakeLayout(int64_t staged_bytes, int items, int matrices, int warps, int stages,
                         int64_t stage_bytes) {
  Layout l;
  l.red_off = AlignUp(staged_bytes, 16);
  l.ring_off = AlignUp(l.red_off + PartialBytes(items, matrices), 128);
  l.bar_off = l.ring_off + int64_t{warps} * stages * stage_bytes;
  l.bytes = l.bar_off + int64_t{warps} * stages * 8;
  return l;
}

inline Plan MakePlan(const PlanInput& in) {
  Plan p;
  p.warps = in.warps;
  p.slices = in.slices;
  p.slice_pairs = in.slice_pairs;
  p.last_pairs = in.last_pairs;
  p.chunk_pairs = in.chunk_pairs;
  p.units_per_round = UnitsPerRound(in.slices, in.warps);
  int64_t d = in.ring_budget / (static_cast<int64_t>(in.warps) * in.stage_bytes);
  if (d < in.min_stages) d = in.min_stages;
  if (d > in.max_stages) d = in.max_stages;
  p.stages = static_cast<int>(d);
  p.grid = 0;  // set by the launcher (needs the occupancy)
  return p;
}

}  // namespace dsinfer::backend::cuda::qstream
