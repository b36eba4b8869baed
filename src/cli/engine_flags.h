// The engine flags that `generate` and `serve` share (--device, --threads, --state-memory-mb,
// --max-batch-tokens, --max-running, --max-model-len) and their reading into EngineOptions.
#pragma once

#include <vector>

#include "base/status.h"
#include "cli/flags.h"
#include "dsinfer/engine.h"

namespace dsinfer::cli {

std::vector<FlagSpec> EngineFlagSpecs();
// EngineOptions for --model and the engine flags; InvalidArgument naming a bad value.
StatusOr<EngineOptions> EngineOptionsFromFlags(const Flags& flags);

}  // namespace dsinfer::cli
