// The FP8-instruction numerics mode's linears (fp8mma_linear_sm90.cu; internal to backend/cuda:
// linear_sm90.cu's launchers route weights with WeightRef::mma here). Every output element is
// backend/wgmma_fp8.h's fp8mma::Dot of the row's act_quant codes and the weight row, bit for bit
// (the CPU reference is cpu::Fp8MmaGemm): per k slice of 512 columns from zero, per 128-column
// block four wgmma k32 .e4m3 steps chained from zero and acc = fmaf(r, s_w * s_x, acc), the slices
// added in order. FP4 weights in FP8's form (io::QuantizedToMma): per row and block the scale
// 2^(e_max - 127) of its groups' largest ue8m0 byte, each group's codes shifted by its distance
// from it. Which kernel runs (the TMA warp-specialized tile, the gather tile, split by slice or
// not) changes no bit.
#pragma once

#include <cstdint>

#include "backend/cuda/linear.cuh"

namespace dsinfer::backend::cuda {

// act_quant of rows [0, rows) of x (columns [0, width)) as e4m3 codes q[r * ldq + c] (ldq >=
// MmaQuantLd(width), a multiple of 16; the codes of a last partial block's missing columns 0) and
// scales transposed, s_t[(c / 128) * ld_t + r] (ld_t >= MmaScaleLd(rows)): cpu::ActQuantCodes'
// bits.
void LaunchMmaActQuant(const float* x, int64_t ldx, int64_t rows, int64_t width, uint8_t* q,
                       int64_t ldq, float* s_t, int64_t ld_t, StreamHandle stream);

// A dense linear / routed experts with WeightRef::mma weights (x's codes: p.xq's mode form, else
// made into p.aq, which must hold them either way: linear.cuh).
void LaunchMmaLinear(const LinearParams& p, StreamHandle stream);
void LaunchMmaExpertLinear(const ExpertLinearParams& p, StreamHandle stream);
// W1 into p1.y and W3 into u, x quantized once for both; then the SwiGLU into p1.y, or with
// p1.swiglu_to_aq its act_quant codes into p1.aq, returned (as the experts' below).
QuantizedRows LaunchMmaLinearSwiglu(const LinearParams& p1, const WeightRef& w3, float* u,
                                    float limit, StreamHandle stream);
// W1 into p1.y and W3 into u over the same pairs, x quantized (and, for the TMA-fed tile, its
// pairs' rows gathered) once for both; then the SwiGLU into p1.y, or with p1.swiglu_to_aq its
// act_quant codes into p1.aq (MmaActQuantKernel's bits of SwigluF's values), returned.
QuantizedRows LaunchMmaExpertLinearSwiglu(const ExpertLinearParams& p1, const void* const* w3_data,
                                          const void* const* w3_scale, float* u, float limit,
                                          StreamHandle stream);

// Launches so far in this process: of the TMA kernel, of the gather tile, of the gather tile
// split by slice, of the warp-specialized gather tile for routed experts (tests check which ran).
int64_t MmaTmaLaunches();
int64_t MmaTileLaunches();
int64_t MmaSplitLaunches();
int64_t MmaWsExpertLaunches();
int64_t MmaWsTmaExpertLaunches();   // of those, the TMA-fed form's
int64_t MmaWsWideExpertLaunches();  // of those, with 192-token tiles (fp8mma_wide_experts)

}  // namespace dsinfer::backend::cuda
