// The bf16 linear on the tensor cores with fp32-exact operands, for the 129,280-row head:
// y[m, n] = x[m, k] · W[n, k]ᵀ, W bf16, x fp32. Each x row is split into three bf16 parts,
// x = x1 + x2 + x3 exactly (x1 = bf16(x), x2 = bf16(x - x1), x3 = x - x1 - x2: 8 + 8 + 8 bits of
// the 24-bit mantissa), so every product w · x_i is exact in fp32 and the sum is fp32-accurate;
// the accumulation is the tensor cores' (mma.sync m16n8k16 bf16, fp32 accumulate).
//
// Batch invariance: k is cut into `slices` equal runs (Bf16TcSlices(n, k): a function of the
// shape only; 1 for wide matrices such as the head); each output element is, per slice, one fixed
// chain — per 16-column step, the three parts in the order x3, x2, x1, each an mma into the
// slice's accumulator from zero — and then the slices' results summed in slice order, whatever
// m, the token tile or the grid (small-m and many-row launches differ in the warps' work only),
// so a row's bits do not depend on the batch: prefill = decode.
//
// Header without CUDA types; the launcher allocates nothing.
#pragma once

#include <cstdint>

#include "backend/cuda/runtime.h"
#include "base/status.h"

namespace dsinfer::backend::cuda {

// The token tile: 8 tokens a block (128 / slices weight rows), 64 (128 weight rows), or 32 / 64 /
// 128 on warpgroup MMA (128 weight rows; bf16_tc_wg_sm90.cu). Not a numerics choice: every
// element's chains and sum are the same whichever.
enum class Bf16TcTile { kAuto, kFew, kMany, kWg };

struct Bf16TcLinearParams {
  const uint16_t* w = nullptr;  // [n, k] bf16, row-major, 16-byte aligned rows (k % 8 == 0)
  int64_t n = 0, k = 0;
  const float* x = nullptr;  // [m, ldx] fp32
  int64_t ldx = 0;
  int64_t m = 0;
  uint16_t* split = nullptr;  // scratch: Bf16SplitElements(m, k) bf16 (x's three parts)
  // split holds x's parts already (LaunchBf16Split of the same rows): no pre-pass. x is then
  // not read, but must still be set.
  bool presplit = false;
  // k slices: 0 for Bf16TcSlices(n, k) (what the model uses); else a power of two up to
  // kMaxBf16TcSlices dividing k's 64-column stages (tests).
  int k_slices = 0;
  Bf16TcTile tile = Bf16TcTile::kAuto;  // kAuto: kWg from kBf16TcWgRows, else Bf16TcManyTile
  float* y = nullptr;                   // [m, ldy]
  int64_t ldy = 0;
  // InvalidArgument naming what is wrong (null buffers, shapes, strides, alignment).
  Status Validate() const;
};
// kAuto takes the warpgroup-MMA tile from this many rows (should the driver refuse its tensor
// maps, the mma.sync tiles below); its token tile is the fewest of 32, 64, 128 that holds the
// rows.
constexpr int64_t kBf16TcWgRows = 32;
// Launches of the warpgroup-MMA tile so far in this process (tests check that it ran).
int64_t Bf16TcWgLaunches();
// kAuto's choice between the mma.sync tiles: the 64-token tile from kBf16TcManyRows rows when it
// makes at least kBf16TcManyBlocks blocks (else the 8-token tile: more blocks for few weight
// rows); never a result.
constexpr int64_t kBf16TcManyRows = 32;
constexpr int64_t kBf16TcManyBlocks = 32;
bool Bf16TcManyTile(int64_t n, int64_t m);
// Whether a launch asking for `tile` that does not run the warpgroup-MMA tile takes the 64-token
// tile (kAuto: Bf16TcManyTile; kMany, or kWg refused: yes; kFew: no).
bool Bf16TcManyTileFor(Bf16TcTile tile, int64_t n, int64_t m);
// The most k slices, and the weight rows under which a matrix takes more than one (so that the
// few-row tile, 128 / slices rows a block, has n · slices / 128 >= 128 blocks).
constexpr int kMaxBf16TcSlices = 8;
constexpr int64_t kBf16TcSliceRows = 16384;
// Scratch elements for m rows of width k.
int64_t Bf16SplitElements(int64_t m, int64_t k);
// Whether the kernel takes this shape (k a multiple of 16, n > 0).
bool Bf16TcLinearSupports(int64_t n, int64_t k);
// The k slices of an (n, k) matrix: doubled from 1 while n · slices < kBf16TcSliceRows, up to
// kMaxBf16TcSlices, while the slices split k's 64-column stages evenly.
int Bf16TcSlices(int64_t n, int64_t k);
// x's m rows of width k into their three bf16 parts (split: Bf16SplitElements(m, k)), for
// launches with presplit (several linears of the same rows).
void LaunchBf16Split(const float* x, int64_t ldx, int64_t m, int64_t k, uint16_t* split,
                     StreamHandle stream);
void LaunchBf16TcLinear(const Bf16TcLinearParams& p, StreamHandle stream);
// Internal to LaunchBf16TcLinear: the warpgroup-MMA tile over k padded to kp in `slices` slices;
// false, launching nothing, if the driver refuses its tensor maps or the grid would not fit.
bool TryLaunchBf16TcWg(const Bf16TcLinearParams& p, int64_t kp, int slices, StreamHandle stream);

}  // namespace dsinfer::backend::cuda
