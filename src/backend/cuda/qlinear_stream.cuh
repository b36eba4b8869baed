// The streamed FP8/FP4 decode linear (qlinear_stream_sm90.cu), internal to backend/cuda: the
// one-token-tile launches of LaunchQLinear (dense m <= 8, routed experts of a decode step) with
// the weights streamed by the bulk copy engine through per-warp shared-memory rings, in a
// persistent grid (qlinear_stream_plan.h). The arithmetic is qlinear_core.cuh's PairMma, slice by
// slice, the slices' partials added in slice order: the same bits as QLinearKernel.
//
// Off by default until GPU-measured: DSINFER_QLINEAR_STREAM=1 in the environment turns it on (read
// at every launch, so a test can switch it). DSINFER_QLINEAR_STREAM_BLOCKS=n: n persistent blocks
// per SM instead of one (up to 4, as they fit); DSINFER_QLINEAR_STREAM_GRID=n: at most n blocks
// (tests); DSINFER_QLINEAR_STREAM_STAGES=n: n ring stages per warp (sweeps);
// DSINFER_QLINEAR_STREAM_WARPS=4: 4-warp blocks instead of 8.
#pragma once

#include <cstdint>

#include "backend/cuda/qlinear.cuh"

namespace dsinfer::backend::cuda {

bool QLinearStreamEnabled();
// Launches taken by the streamed kernel since the process started (tests check the path taken).
int64_t QLinearStreamLaunches();

// Launches a (already validated, a.n/a.k/a.scale_format set) one-token-tile linear through the
// streamed kernel when it applies; false: nothing launched, the caller takes the register path.
// x_rows: rows of x (dense: m; experts: the tokens or pairs x holds); slots: expert grid (0:
// dense); width: the input columns the call reads (grouped input included).
bool TryLaunchQLinearStream(const QLinearArgs& a, bool fp4, bool dual, int slots, int64_t x_rows,
                            int64_t width, StreamHandle stream);

}  // namespace dsinfer::backend::cuda
