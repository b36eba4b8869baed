// EngineCore with structured output on the small random model and a byte-level tokenizer (ids
// 0..255 are the bytes): a draw whose grammar mask is late sits out the step instead of stalling
// the batch. A test hook blocks one mask (request, completion, position) on its worker until the
// test releases it — no wall-clock race decides what the test checks: while it is blocked, the
// other requests advance a token a step and the blocked completion draws nothing; afterwards every
// completion's tokens and logprobs equal those of a run that waits for every mask, with overlap
// scheduling on and off. With the deadline at 0 a slow mask stalls the step as before.
#include <gtest/gtest.h>

#include <atomic>
#include <cctype>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <tuple>

#include "engine_test_util.h"
#include "test_util.h"
#include "tokenizer/byte_level.h"

namespace dsinfer::engine {
namespace {

using testing::Outcome;
using Results = std::map<std::pair<uint64_t, int>, Outcome>;

// A tokenizer.json whose ids 0..255 are the bytes (no merges): one letter, one token.
std::unique_ptr<TextCodec> ByteCodec() {
  static const std::string path = [] {
    nlohmann::json vocab = nlohmann::json::object();
    for (int b = 0; b < 256; ++b)
      vocab[tokenizer::BytesToByteLevel(std::string(1, static_cast<char>(b)))] = b;
    nlohmann::json j;
    j["model"] = {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}};
    j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
    const std::string file = testing::ScratchDir("byte_tokenizer") + "/tokenizer.json";
    std::ofstream(file) << j.dump();
    return file;
  }();
  auto codec = LoadTextCodec(testing::EngineModelDir(), path);
  if (!codec.ok()) throw std::runtime_error(codec.status().ToString());
  return std::move(codec).value();
}

std::unique_ptr<EngineCore> NewCore(const EngineOptions& o) {
  auto core = EngineCore::Create(o, ByteCodec());
  if (!core.ok()) throw std::runtime_error(core.status().ToString());
  return std::move(core).value();
}

// Requests 1..5: 1 and 5 constrained by a regex, 4 too with n = 2 (its second completion forks
// from the first at its first draw), 2 and 3 free; all seeded at temperature 1 with logprobs.
// Request 5 ends by its token limit (its last draw is known to finish it at the launch, so with
// overlap scheduling the scheduler holds it).
constexpr int kPromptLen[] = {0, 7, 9, 5, 11, 6};  // by request id
std::vector<GenerateRequest> Requests() {
  std::vector<GenerateRequest> reqs;
  for (uint64_t id = 1; id <= 5; ++id) {
    GenerateRequest r;
    r.prompt_ids = testing::RandomIds(kPromptLen[id], static_cast<uint32_t>(40 + id));
    auto& p = r.params;
    p.temperature = 1.0f;
    p.seed = 500 + id;
    p.logprobs = true;
    p.max_tokens = id == 5 ? 6 : 20;
    if (id == 1 || id == 4 || id == 5) {
      p.structured_outputs.kind = OutputConstraint::Kind::kRegex;
      p.structured_outputs.text = "[a-z]{3,8}(-[0-9]{2,3}){1,4}";
    } else {
      p.ignore_eos = true;
    }
    if (id == 4) p.n = 2;
    reqs.push_back(r);
  }
  return reqs;
}

// A mask that blocks on its worker until released.
struct Gate {
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool entered = false, released = false;
  };
  std::shared_ptr<State> state = std::make_shared<State>();
  MaskWorkers::Hook Hook(std::tuple<uint64_t, int, int64_t> key) const {
    return [s = state, key](uint64_t request, int index, int64_t position) {
      if (std::make_tuple(request, index, position) != key) return;
      std::unique_lock<std::mutex> lock(s->mu);
      s->entered = true;
      s->cv.wait(lock, [&] { return s->released; });
    };
  }
  bool entered() const {
    std::lock_guard<std::mutex> lock(state->mu);
    return state->entered;
  }
  void Release() const {
    {
      std::lock_guard<std::mutex> lock(state->mu);
      state->released = true;
    }
    state->cv.notify_all();
  }
};

// Releases a gate when it goes (declared after the core, so before the core's mask workers are
// joined, even when an assertion ends the test early).
struct ReleaseOnExit {
  Gate gate;
  ~ReleaseOnExit() { gate.Release(); }
};

// A run: every completion's outcome, and per step the tokens each completion emitted.
struct Trace {
  Results results;
  std::vector<std::map<std::pair<uint64_t, int>, int>> emitted;  // per step
  EngineStats stats;
};

// Steps `core` until idle; `after_step(step, emitted this step)` runs after each step.
template <typename F>
Trace Drive(EngineCore& core, F after_step) {
  Trace run;
  const auto reqs = Requests();
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto p = core.Prepare(reqs[i]);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    core.Add(i + 1, *p);
  }
  std::vector<StreamEvent> events;
  for (int step = 0; step < 2000 && core.HasWork(); ++step) {
    core.Step(&events);
    std::map<std::pair<uint64_t, int>, int> now;
    for (auto& ev : events) {
      EXPECT_TRUE(ev.error.ok()) << ev.error.ToString();
      Outcome& o = run.results[{ev.request_id, ev.index}];
      o.ids.insert(o.ids.end(), ev.ids.begin(), ev.ids.end());
      for (const auto& lp : ev.logprobs) o.logprobs.push_back(lp.logprob);
      o.text += ev.text;
      if (ev.finish != FinishReason::kNone) {
        o.finish = ev.finish;
        o.stop = ev.stop;
      }
      now[{ev.request_id, ev.index}] += static_cast<int>(ev.ids.size());
    }
    events.clear();
    after_step(step, now);
    run.emitted.push_back(std::move(now));
  }
  EXPECT_FALSE(core.HasWork());
  EXPECT_EQ(core.num_states(), 0u);
  run.stats = core.Stats();
  return run;
}

EngineOptions Options(bool overlap, int64_t deadline_us) {
  EngineOptions o = testing::SmallEngineOptions();
  o.overlap = overlap ? EngineOptions::Overlap::kOn : EngineOptions::Overlap::kOff;
  o.structured_mask_deadline_us = deadline_us;
  return o;
}

// Every mask waited for (the behaviour before late masks could sit out).
const Trace& Reference(bool overlap) {
  static std::map<bool, Trace> runs;
  if (!runs.count(overlap)) {
    auto core = NewCore(Options(overlap, 0));
    runs[overlap] = Drive(*core, [](int, const auto&) {});
  }
  return runs.at(overlap);
}

TEST(EngineStructuredTest, ReferenceRunsAreConstrainedAndAgree) {
  const Trace& serial = Reference(false);
  ASSERT_EQ(serial.results.size(), 6u);  // 5 requests, one with n = 2
  EXPECT_EQ(serial.results, Reference(true).results);
  for (uint64_t id : {1, 4, 5}) {
    for (int index = 0; index < (id == 4 ? 2 : 1); ++index) {
      const Outcome& o = serial.results.at({id, index});
      ASSERT_FALSE(o.ids.empty());
      // The regex's language: letters, then dash-separated digit groups (EOS, id 1, may end it).
      EXPECT_TRUE(std::islower(o.ids[0])) << o.text;
      for (int32_t t : o.ids) EXPECT_TRUE(std::isalnum(t) || t == '-' || t == 1) << o.text;
    }
  }
  EXPECT_EQ(serial.results.at({5, 0}).finish, FinishReason::kLength);
  EXPECT_EQ(serial.stats.structured_mask_late, 0);
}

// The masks blocked, one per run: a decode draw, a sibling's first draw (forked at its parent's
// first sample), the parent's own first draw beside its sibling's, and a draw that reaches the
// token limit (held by the overlap scheduler at its launch).
struct Blocked {
  const char* what;
  uint64_t request;
  int index;
  int64_t offset;  // after the prompt
};
constexpr Blocked kBlocked[] = {{"decode", 1, 0, 3},
                                {"sibling's first draw", 4, 1, 0},
                                {"first draw with a sibling", 4, 0, 0},
                                {"last draw", 5, 0, 5}};

TEST(EngineStructuredTest, ALateMaskSitsOutWhileTheOthersAdvance) {
  constexpr int kBlockedSteps = 3;
  for (bool overlap : {false, true}) {
    for (const Blocked& b : kBlocked) {
      SCOPED_TRACE(std::string(b.what) + (overlap ? ", overlap" : ", serial"));
      auto core = NewCore(Options(overlap, 2000));
      ReleaseOnExit guard;
      const std::pair<uint64_t, int> blocked{b.request, b.index};
      core->set_mask_hook(guard.gate.Hook({b.request, b.index, kPromptLen[b.request] + b.offset}));
      int watched = -1;  // blocked steps checked so far (-1: the blocked mask has not started)
      const Trace run = Drive(*core, [&](int, const std::map<std::pair<uint64_t, int>, int>& now) {
        if (watched < 0) {
          if (guard.gate.entered()) watched = 0;
          return;
        }
        if (watched == kBlockedSteps) return;
        // A step while the mask is blocked: the free requests (still short of their 20 tokens)
        // drew one token each; the blocked completion none.
        EXPECT_EQ(now.count(blocked), 0u) << "drew without its mask";
        EXPECT_EQ(now.count({2, 0}) ? now.at({2, 0}) : 0, 1);
        EXPECT_EQ(now.count({3, 0}) ? now.at({3, 0}) : 0, 1);
        if (++watched == kBlockedSteps) guard.gate.Release();
      });
      EXPECT_EQ(watched, kBlockedSteps);
      EXPECT_GE(run.stats.structured_mask_late, kBlockedSteps);
      // The same tokens and logprobs (bit for bit) as when every mask is waited for.
      EXPECT_EQ(run.results, Reference(false).results);
      EXPECT_EQ(run.stats.requests_finished, 5);
    }
  }
}

// Deadline 0: the step waits for a slow mask, so every token comes at the same step as without it.
TEST(EngineStructuredTest, DeadlineZeroWaitsForASlowMask) {
  for (bool overlap : {false, true}) {
    SCOPED_TRACE(overlap ? "overlap" : "serial");
    auto core = NewCore(Options(overlap, 0));
    std::atomic<int> slowed{0};
    core->set_mask_hook([&](uint64_t request, int, int64_t position) {
      if (request == 1 && position >= kPromptLen[1] + 2 && position < kPromptLen[1] + 5) {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        ++slowed;
      }
    });
    const Trace run = Drive(*core, [](int, const auto&) {});
    EXPECT_EQ(slowed.load(), 3);
    EXPECT_EQ(run.stats.structured_mask_late, 0);
    // Each of the three steps waited for its slow mask (started in that step).
    EXPECT_GE(run.stats.step_s, 0.09);
    EXPECT_EQ(run.results, Reference(overlap).results);
    EXPECT_EQ(run.emitted, Reference(overlap).emitted);
  }
}

// With speculative decoding a completion's plain draws (here its first, which never has drafts)
// may sit out too; verify chunks wait for their masks. The outputs stay those without drafts.
TEST(EngineStructuredTest, ALateFirstDrawSitsOutWithSpeculation) {
  EngineOptions o = Options(false, 2000);
  o.speculative.method = SpeculativeOptions::Method::kNgram;
  o.speculative.num_tokens = 3;
  auto core = NewCore(o);
  ReleaseOnExit guard;
  core->set_mask_hook(guard.gate.Hook({1, 0, kPromptLen[1]}));
  int watched = -1;
  const Trace run = Drive(*core, [&](int, const std::map<std::pair<uint64_t, int>, int>& now) {
    if (watched < 0) {
      if (guard.gate.entered()) watched = 0;
      return;
    }
    if (watched == 2) return;
    EXPECT_EQ(now.count({1, 0}), 0u);
    EXPECT_GE(now.count({2, 0}) ? now.at({2, 0}) : 0, 1);
    if (++watched == 2) guard.gate.Release();
  });
  EXPECT_EQ(watched, 2);
  EXPECT_GE(run.stats.structured_mask_late, 2);
  EXPECT_GT(run.stats.spec_draft_tokens, 0);
  EXPECT_EQ(run.results, Reference(false).results);
}

TEST(EngineStructuredTest, BadDeadlineIsRefused) {
  EngineOptions o = testing::SmallEngineOptions();
  o.structured_mask_deadline_us = -1;
  auto core = EngineCore::Create(o, ByteCodec());
  ASSERT_FALSE(core.ok());
  EXPECT_NE(core.status().ToString().find("structured_mask_deadline_us"), std::string::npos);
}

}  // namespace
}  // namespace dsinfer::engine
