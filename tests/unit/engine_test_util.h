// Helpers for engine tests: a shared small model dir of each model family, a fake text codec (one
// letter per id), and a driver that runs an EngineCore until it is idle and gathers its
// completions. The engine tests that hold for every family run on both (Family).
#pragma once

#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine/engine_core.h"
#include "letter_codec.h"
#include "model/deepseek_v4/state_layout.h"
#include "model/deepseek_v41/state_layout.h"
#include "model_test_util.h"

namespace dsinfer::testing {

// The small model of each family: SmallConfig() (DeepSeek-V4) and SmallV41Config()
// (DeepSeek-V4.1), both with 300-token vocabularies, so RandomIds() suits either.
enum class Family { kV4, kV41 };

inline std::string FamilyName(Family f) { return f == Family::kV4 ? "V4" : "V41"; }

// For INSTANTIATE_TEST_SUITE_P(..., ::testing::Values(Family::kV4, Family::kV41), FamilyParamName).
inline std::string FamilyParamName(const ::testing::TestParamInfo<Family>& info) {
  return FamilyName(info.param);
}

inline const std::string& EngineModelDir(Family f = Family::kV4) {
  static const std::string* v4 =
      new std::string(SmallModelDir(model::deepseek_v4::WeightFormat::kF32, "engine"));
  static const std::string* v41 = new std::string(SmallV41ModelDir("engine_v41"));
  return f == Family::kV4 ? *v4 : *v41;
}

// The state layout the engine plans for the family's small model with `rollback_slack` (with
// `drafter`: DeepSeek-V4.1's DSpark rings; DeepSeek-V4's MTP ring is always there).
inline cache::StateLayout SmallLayout(Family f, int rollback_slack = 0, bool drafter = false) {
  return f == Family::kV4 ? model::deepseek_v4::DeepseekV4StateLayout(SmallConfig(), rollback_slack)
                          : model::deepseek_v41::DeepseekV41StateLayout(SmallV41Config(),
                                                                        rollback_slack, drafter);
}

// The rollback slack of the engine's CPU state layout with the default options: one token, which
// a draw whose grammar mask is late rolls back (EngineOptions::structured_mask_deadline_us > 0).
inline constexpr int kEngineRollbackSlack = 1;
// With k speculative tokens: a constrained verify chunk whose first row's mask is late rolls back
// its known token and its drafts, so the slack is k + 1 (at most 16).
inline constexpr int EngineRollbackSlack(int k) { return k + 1 < 16 ? k + 1 : 16; }

inline EngineOptions SmallEngineOptions(Family f = Family::kV4) {
  EngineOptions o;
  o.model_dir = EngineModelDir(f);
  o.num_threads = 1;
  o.state_memory_bytes = 64 << 20;
  o.max_batch_tokens = 64;
  o.max_running = 16;
  return o;
}

struct Outcome {
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  std::string text;
  FinishReason finish = FinishReason::kNone;
  std::string stop;
  bool operator==(const Outcome&) const = default;
};

// Steps `core` until idle (and at least `min_steps` steps), applying `before_step(step)` first;
// returns the outcome per (request, index).
template <typename F>
std::map<std::pair<uint64_t, int>, Outcome> Drain(engine::EngineCore& core, F before_step,
                                                  int min_steps = 0) {
  std::map<std::pair<uint64_t, int>, Outcome> out;
  std::vector<StreamEvent> events;
  for (int step = 0; step < 100000; ++step) {
    before_step(step);
    if (!core.HasWork() && step >= min_steps) break;
    core.Step(&events);
    for (auto& ev : events) {
      Outcome& o = out[{ev.request_id, ev.index}];
      o.ids.insert(o.ids.end(), ev.ids.begin(), ev.ids.end());
      for (const auto& lp : ev.logprobs) o.logprobs.push_back(lp.logprob);
      o.text += ev.text;
      if (ev.finish != FinishReason::kNone) {
        o.finish = ev.finish;
        o.stop = ev.stop;
      }
    }
    events.clear();
  }
  return out;
}

}  // namespace dsinfer::testing
