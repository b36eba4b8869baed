// The DeepSeek-V4.1 weight schema: every tensor the text model of a config reads, with its
// official name (the reference's module path without the `model.` prefix; the LM head is `head`),
// logical shape and storage class, in checkpoint order. The loader (weights.cc), init-model's
// writer (init_presets.cc) and the name-coverage test read it. The DSpark draft stages (`mtp.*`)
// have their own schema, loaded only when the drafter runs; the vision tower's tensors
// (`vision.*` / `aligner.*` / `image_*`, not built) are skipped. Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "io/deepseek_v41_config.h"
#include "model/deepseek_v4/weight_schema.h"

namespace dsinfer::model::deepseek_v41 {

using deepseek_v4::LinearClass;
using deepseek_v4::TensorKind;
using deepseek_v4::TensorSpec;

std::vector<TensorSpec> WeightSchema(const io::DeepseekV41Config& config);

// The DSpark draft stages' tensors (`mtp.{s}.*`; empty without draft layers).
std::vector<TensorSpec> DSparkWeightSchema(const io::DeepseekV41Config& config);

// True for checkpoint tensors the text model's loader skips: the vision tower's, and the DSpark
// stages' (DSparkWeightSchema; loaded apart, when the drafter runs).
bool IsSkippedTensor(const std::string& name);

}  // namespace dsinfer::model::deepseek_v41
