// Helpers for engine tests: a shared small model dir, a fake text codec (one letter per id), and a
// driver that runs an EngineCore until it is idle and gathers its completions.
#pragma once

#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine/engine_core.h"
#include "letter_codec.h"
#include "model_test_util.h"

namespace dsinfer::testing {

inline const std::string& EngineModelDir() {
  static const std::string* dir =
      new std::string(SmallModelDir(model::deepseek_v4::WeightFormat::kF32, "engine"));
  return *dir;
}

// The rollback slack of the engine's CPU state layout with the default options: one token, which
// a draw whose grammar mask is late rolls back (EngineOptions::structured_mask_deadline_us > 0).
inline constexpr int kEngineRollbackSlack = 1;

inline EngineOptions SmallEngineOptions() {
  EngineOptions o;
  o.model_dir = EngineModelDir();
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
