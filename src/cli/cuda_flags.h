// The CUDA backend's tuning flags, shared by the subcommands that run the CUDA model (`bench`,
// `logits --backend cuda`): kernel-variant choices (backend/cuda/runtime.h KernelOptions) and the
// model's stream branches. None changes a result; they exist for A/B timing and debugging.
// CUDA builds only.
#pragma once

#include <vector>

#include "backend/cuda/runtime.h"
#include "base/status.h"
#include "cli/flags.h"
#include "model/deepseek_v4/cuda/cuda_model.h"

namespace dsinfer::cli {

// --no-pdl, --no-branches, --gemv f32,bf16|none, --no-gemv-dual, --qlinear-warps N.
std::vector<FlagSpec> CudaFlagSpecs();

// Reads those flags: sets the process's KernelOptions (before any launch) and the model's
// branches. InvalidArgument for a bad value.
Status ApplyCudaFlags(const Flags& flags, model::deepseek_v4::cuda::CudaModelOptions* options);

}  // namespace dsinfer::cli
