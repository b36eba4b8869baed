// Speculative decoding on the CPU engine with the GPU engine test's workload (engine_mix.h). It
// found drafts riding on a prompt's last token, where n > 1 siblings draw too.
#include <gtest/gtest.h>

#include "engine_mix.h"

namespace dsinfer {
namespace {

TEST(EngineSpeculativeTest, GoldenMixGivesTheSameIdsAndLogprobs) {
  testing::ExpectSpeculationExact(Device::kCpu);
}

// DeepSeek-V4.1 rolls back its rejected drafts too (window and compressor rings by position, the
// ratio-2 / ratio-1 entry lists truncated to floor(length / ratio)).
TEST(EngineSpeculativeTest, GoldenV41MixGivesTheSameIdsAndLogprobs) {
  testing::ExpectSpeculationExact(Device::kCpu, testing::kGoldenV41ModelA);
}

}  // namespace
}  // namespace dsinfer
