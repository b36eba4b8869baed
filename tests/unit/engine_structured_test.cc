// EngineCore with structured output on the small random model and a byte-level tokenizer (ids
// 0..255 are the bytes): a draw whose grammar mask is late sits out the step instead of stalling
// the batch. A test hook blocks one mask (request, completion, position) on its worker, holding
// the constraint's automaton as a slow mask computation does, until the test releases it — no
// wall-clock race decides what the test checks: while it is blocked, the free requests advance a
// token a step and the blocked completion draws nothing; afterwards every completion's tokens and
// logprobs equal those of a run that waits for every mask, with overlap scheduling on and off.
// With the deadline at 0 a slow mask stalls the step as before. Speculative verify chunks draw at
// the rows whose masks are ready, or sit out. The engine thread does not wait for a busy automaton
// when it emits a token either: the next mask job takes the token over.
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
using Key = std::pair<uint64_t, int>;  // (request, completion index)

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

GenerateRequest Request(uint64_t id, int prompt_len, int max_tokens, const std::string& regex) {
  GenerateRequest r;
  r.prompt_ids = testing::RandomIds(prompt_len, static_cast<uint32_t>(40 + id));
  auto& p = r.params;
  p.temperature = 1.0f;
  p.seed = 500 + id;
  p.logprobs = true;
  p.max_tokens = max_tokens;
  if (regex.empty()) {
    p.ignore_eos = true;
  } else {
    p.structured_outputs.kind = OutputConstraint::Kind::kRegex;
    p.structured_outputs.text = regex;
  }
  return r;
}

// Requests 1..6: 2 and 3 free; 1 and 6 share a constraint (one automaton), 4 (n = 2: its second
// completion forks from the first at its first draw) and 5 have their own. All seeded at
// temperature 1 with logprobs. The constraints need 9 or more tokens before EOS may end them, so
// no completion ends while a test blocks another's mask (an end is the one emit that waits for
// the automaton). Request 5 ends by its token limit (its last draw is known to finish it at the
// launch, so with overlap scheduling the scheduler holds it).
constexpr int kPromptLen[] = {0, 7, 9, 5, 11, 6, 8};  // by request id
std::vector<GenerateRequest> Requests() {
  const std::string a = "[a-z]{8,12}(-[0-9]{2,3}){1,4}";
  std::vector<GenerateRequest> reqs = {
      Request(1, kPromptLen[1], 20, a),
      Request(2, kPromptLen[2], 20, ""),
      Request(3, kPromptLen[3], 20, ""),
      Request(4, kPromptLen[4], 20, "[a-z]{6,9}(-[0-9]{2,3}){1,4}"),
      Request(5, kPromptLen[5], 6, "[a-z]{3,8}(-[0-9]{2,4}){1,4}"),
      Request(6, kPromptLen[6], 20, a)};
  reqs[3].params.n = 2;
  return reqs;
}

// A wait that only a deadlock would reach: the blocked thread gives up, and the test fails (the
// engine waited for what it must not) instead of hanging.
constexpr auto kDeadlock = std::chrono::seconds(30);

// A mask that blocks on its worker until released.
struct Gate {
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool entered = false, released = false, gave_up = false;
  };
  std::shared_ptr<State> state = std::make_shared<State>();
  MaskWorkers::Hook Hook(std::tuple<uint64_t, int, int64_t> key) const {
    return [s = state, key](uint64_t request, int index, int64_t position) {
      if (std::make_tuple(request, index, position) != key) return;
      std::unique_lock<std::mutex> lock(s->mu);
      s->entered = true;
      s->gave_up = !s->cv.wait_for(lock, kDeadlock, [&] { return s->released; });
    };
  }
  bool gave_up() const {
    std::lock_guard<std::mutex> lock(state->mu);
    return state->gave_up;
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

// A run: every completion's outcome, the step of each of its tokens, and what each step emitted.
struct Trace {
  Results results;
  std::map<Key, std::vector<int>> token_steps;
  std::map<Key, bool> finished_without_token;  // its last event had no token
  EngineStats stats;
};

// Adds `reqs` (ids 1, 2, ...) and steps `core` until idle; `after_step(step, tokens emitted this
// step)` runs after each step.
template <typename F>
Trace Drive(EngineCore& core, const std::vector<GenerateRequest>& reqs, F after_step) {
  Trace run;
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto p = core.Prepare(reqs[i]);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    core.Add(i + 1, *p);
  }
  std::vector<StreamEvent> events;
  for (int step = 0; step < 2000 && core.HasWork(); ++step) {
    core.Step(&events);
    std::map<Key, int> now;
    for (auto& ev : events) {
      EXPECT_TRUE(ev.error.ok()) << ev.error.ToString();
      const Key key{ev.request_id, ev.index};
      Outcome& o = run.results[key];
      o.ids.insert(o.ids.end(), ev.ids.begin(), ev.ids.end());
      for (const auto& lp : ev.logprobs) o.logprobs.push_back(lp.logprob);
      o.text += ev.text;
      if (ev.finish != FinishReason::kNone) {
        o.finish = ev.finish;
        o.stop = ev.stop;
        run.finished_without_token[key] = ev.ids.empty();
      }
      for (size_t k = 0; k < ev.ids.size(); ++k) run.token_steps[key].push_back(step);
      if (!ev.ids.empty()) now[key] += static_cast<int>(ev.ids.size());
    }
    events.clear();
    after_step(step, now);
  }
  EXPECT_FALSE(core.HasWork());
  EXPECT_EQ(core.num_states(), 0u);
  run.stats = core.Stats();
  return run;
}

int Tokens(const std::map<Key, int>& now, Key key) {
  auto it = now.find(key);
  return it == now.end() ? 0 : it->second;
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
    runs[overlap] = Drive(*core, Requests(), [](int, const auto&) {});
  }
  return runs.at(overlap);
}

TEST(EngineStructuredTest, ReferenceRunsAreConstrainedAndAgree) {
  const Trace& serial = Reference(false);
  ASSERT_EQ(serial.results.size(), 7u);  // 6 requests, one with n = 2
  EXPECT_EQ(serial.results, Reference(true).results);
  for (Key key : std::vector<Key>{{1, 0}, {4, 0}, {4, 1}, {5, 0}, {6, 0}}) {
    const Outcome& o = serial.results.at(key);
    ASSERT_FALSE(o.ids.empty());
    // The regexes' language: letters, then dash-separated digit groups (EOS, id 1, may end it).
    EXPECT_TRUE(std::islower(o.ids[0])) << o.text;
    for (int32_t t : o.ids) EXPECT_TRUE(std::isalnum(t) || t == '-' || t == 1) << o.text;
  }
  EXPECT_EQ(serial.results.at({5, 0}).finish, FinishReason::kLength);
  EXPECT_EQ(serial.stats.structured_mask_late, 0);
}

// The masks blocked, one per run: a decode draw (its automaton shared with request 6, whose
// emits then find it busy), a sibling's first draw (forked at its parent's first sample), the
// parent's own first draw beside its sibling's, and a draw that reaches the token limit (held by
// the overlap scheduler at its launch).
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
      const Key blocked{b.request, b.index};
      core->set_mask_hook(guard.gate.Hook({b.request, b.index, kPromptLen[b.request] + b.offset}));
      int watched = -1;  // blocked steps checked so far (-1: the blocked mask has not started)
      const Trace run = Drive(*core, Requests(), [&](int, const std::map<Key, int>& now) {
        if (watched < 0) {
          if (guard.gate.entered()) watched = 0;
          return;
        }
        if (watched == kBlockedSteps) return;
        // A step while the mask is blocked: the free requests (still short of their 20 tokens)
        // drew one token each; the blocked completion none.
        EXPECT_EQ(Tokens(now, blocked), 0) << "drew without its mask";
        EXPECT_EQ(Tokens(now, {2, 0}), 1);
        EXPECT_EQ(Tokens(now, {3, 0}), 1);
        if (++watched == kBlockedSteps) guard.gate.Release();
      });
      EXPECT_EQ(watched, kBlockedSteps);
      EXPECT_FALSE(guard.gate.gave_up()) << "the engine waited for the blocked mask";
      EXPECT_GE(run.stats.structured_mask_late, kBlockedSteps);
      // The same tokens and logprobs (bit for bit) as when every mask is waited for.
      EXPECT_EQ(run.results, Reference(false).results);
      EXPECT_EQ(run.stats.requests_finished, 6);
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
    const Trace run = Drive(*core, Requests(), [](int, const auto&) {});
    EXPECT_EQ(slowed.load(), 3);
    EXPECT_EQ(run.stats.structured_mask_late, 0);
    // Each of the three steps waited for its slow mask (started in that step).
    EXPECT_GE(run.stats.step_s, 0.09);
    EXPECT_EQ(run.results, Reference(overlap).results);
    EXPECT_EQ(run.token_steps, Reference(overlap).token_steps);
  }
}

// With speculative decoding a completion's plain draws (here its first, which never has drafts)
// may sit out too. The outputs stay those without drafts.
TEST(EngineStructuredTest, ALateFirstDrawSitsOutWithSpeculation) {
  EngineOptions o = Options(false, 2000);
  o.speculative.method = SpeculativeOptions::Method::kNgram;
  o.speculative.num_tokens = 3;
  auto core = NewCore(o);
  ReleaseOnExit guard;
  // Request 5 has its automaton to itself: with speculation an emit waits for a busy automaton.
  core->set_mask_hook(guard.gate.Hook({5, 0, kPromptLen[5]}));
  int watched = -1;
  const Trace run = Drive(*core, Requests(), [&](int, const std::map<Key, int>& now) {
    if (watched < 0) {
      if (guard.gate.entered()) watched = 0;
      return;
    }
    if (watched == 2) return;
    EXPECT_EQ(Tokens(now, {5, 0}), 0);
    EXPECT_GE(Tokens(now, {2, 0}), 1);
    if (++watched == 2) guard.gate.Release();
  });
  EXPECT_EQ(watched, 2);
  EXPECT_FALSE(guard.gate.gave_up()) << "the engine waited for the blocked mask";
  EXPECT_GE(run.stats.structured_mask_late, 2);
  EXPECT_GT(run.stats.spec_draft_tokens, 0);
  EXPECT_EQ(run.results, Reference(false).results);
}

// Speculative verify chunks do not wait for their masks either. Request 5 (its automaton to
// itself) drafts the reference's next tokens (all correct, so each step verifies 3 drafts); one of
// its masks is blocked: row 0 of its first verify chunk (no row's mask is ready: the chunk sits
// out, its 4 rows rolled back), or row 1 (the chunk draws at row 0 only, verifying no draft, and
// its emitted token is left to the next mask job: the automaton is held). While it is blocked the
// free requests advance, request 5 draws nothing more, and the engine never waits for the mask;
// the outputs are those without speculation, bit for bit.
TEST(EngineStructuredTest, AVerifyChunkDoesNotWaitForItsMasks) {
  const Results& reference = Reference(false).results;
  const std::vector<GenerateRequest> reqs = Requests();
  for (int row : {0, 1}) {
    SCOPED_TRACE("blocked row " + std::to_string(row));
    // A deadline no mask misses unless blocked (row 0's is then ready however loaded the machine).
    EngineOptions o = Options(false, 100'000);
    o.speculative.method = SpeculativeOptions::Method::kNgram;
    o.speculative.num_tokens = 3;
    auto core = NewCore(o);
    core->set_drafter([&](uint64_t id, int index, const std::vector<int32_t>& tokens, int k) {
      const auto& ref = reference.at({id, index}).ids;
      const auto done = static_cast<int64_t>(tokens.size() - reqs[id - 1].prompt_ids.size());
      std::vector<int32_t> d;
      for (int64_t i = done; i < std::min<int64_t>(done + k, static_cast<int64_t>(ref.size())); ++i)
        d.push_back(ref[i]);
      return d;
    });
    ReleaseOnExit guard;
    // The first draw (position = the prompt's length) has no drafts; the next step verifies.
    core->set_mask_hook(guard.gate.Hook({5, 0, kPromptLen[5] + 1 + row}));
    int watched = -1;
    int before = 0;  // request 5's tokens when the mask blocked
    int total5 = 0;
    const Trace run = Drive(*core, reqs, [&](int, const std::map<Key, int>& now) {
      total5 += Tokens(now, {5, 0});
      if (watched < 0) {
        if (guard.gate.entered()) {
          watched = 0;
          before = total5;
        }
        return;
      }
      if (watched == 2) return;
      EXPECT_EQ(Tokens(now, {5, 0}), 0) << "drew without its mask";
      EXPECT_GE(Tokens(now, {2, 0}), 1);
      EXPECT_GE(Tokens(now, {3, 0}), 1);
      if (++watched == 2) guard.gate.Release();
    });
    EXPECT_EQ(watched, 2);
    EXPECT_FALSE(guard.gate.gave_up()) << "the engine waited for the blocked mask";
    // Blocked at row 1, the chunk still drew its row 0's token; at row 0, nothing.
    EXPECT_EQ(before, 1 + row);
    EXPECT_GE(run.stats.structured_mask_late, 2);
    EXPECT_GT(run.stats.spec_accepted_tokens, 0);
    if (row == 1) {
      EXPECT_GE(run.stats.structured_deferred_advances, 1);
    }
    EXPECT_EQ(run.results, reference);
  }
}

// Holds an automaton from another thread (as a worker computing a slow mask would) until released.
class AutomatonHolder {
 public:
  explicit AutomatonHolder(std::shared_ptr<structured::TokenAutomaton> automaton) {
    thread_ = std::thread([this, a = std::move(automaton)] {
      a->RunExclusive([this] {
        std::unique_lock<std::mutex> lock(mu_);
        held_ = true;
        cv_.notify_all();
        gave_up_ = !cv_.wait_for(lock, kDeadlock, [this] { return released_; });
      });
    });
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return held_; });
  }
  bool gave_up() {
    std::lock_guard<std::mutex> lock(mu_);
    return gave_up_;
  }
  ~AutomatonHolder() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false, released_ = false, gave_up_ = false;
  std::thread thread_;
};

// Overlap scheduling: tokens drawn at step 2 are emitted during step 3, while another thread holds
// their constraint's automaton. The engine thread does not wait for it: the completions' next mask
// jobs take the tokens over (and wait for the automaton: those draws sit out step 3). The third
// letter completes "[a-z]{3}", so both completions end when their jobs report it, in an event of
// its own; the outputs are those of a run without the busy automaton.
TEST(EngineStructuredTest, AnEmitDoesNotWaitForABusyAutomaton) {
  const std::string three = "[a-z]{3}";
  const std::vector<GenerateRequest> reqs = {Request(1, 6, 10, three), Request(2, 9, 10, ""),
                                             Request(3, 5, 10, three)};
  EngineOptions o = Options(true, 200'000);  // no mask is that late unless held
  auto reference_core = NewCore(Options(true, 0));
  const Trace reference = Drive(*reference_core, reqs, [](int, const auto&) {});
  ASSERT_EQ(reference.results.at({1, 0}).ids.size(), 3u);
  ASSERT_EQ(reference.token_steps.at({1, 0}).back(), 3);  // drawn at step 2, emitted at step 3
  ASSERT_EQ(reference.token_steps.at({3, 0}).back(), 3);

  auto core = NewCore(o);
  auto prepared = core->Prepare(reqs[0]);
  ASSERT_TRUE(prepared.ok());
  std::shared_ptr<structured::TokenAutomaton> automaton = prepared->constraint;
  std::unique_ptr<AutomatonHolder> holder;
  const Trace run = Drive(*core, reqs, [&](int step, const std::map<Key, int>& now) {
    if (step == 2) holder = std::make_unique<AutomatonHolder>(automaton);  // before step 3
    if (step == 3) {
      EXPECT_EQ(Tokens(now, {1, 0}), 1);  // emitted while the automaton was held
      EXPECT_EQ(Tokens(now, {3, 0}), 1);
      EXPECT_EQ(Tokens(now, {2, 0}), 1);
      EXPECT_FALSE(holder->gave_up()) << "the engine waited for the busy automaton";
      holder.reset();
    }
  });
  EXPECT_GE(run.stats.structured_deferred_advances, 2);
  EXPECT_GE(run.stats.structured_mask_late, 2);
  EXPECT_EQ(run.results, reference.results);
  EXPECT_EQ(run.results.at({1, 0}).finish, FinishReason::kStop);
  EXPECT_TRUE(run.finished_without_token.at({1, 0}));
  EXPECT_TRUE(run.finished_without_token.at({3, 0}));
  EXPECT_FALSE(reference.finished_without_token.at({1, 0}));
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
