// Speculative decoding on the CPU engine with the GPU engine test's workload (engine_mix.h). It
// found drafts riding on a prompt's last token, where n > 1 siblings draw too.
#include <gtest/gtest.h>

#include "engine_mix.h"

namespace dsinfer {
namespace {

TEST(EngineSpeculativeTest, GoldenMixGivesTheSameIdsAndLogprobs) {
  testing::ExpectSpeculationExact(Device::kCpu);
}

}  // namespace
}  // namespace dsinfer
