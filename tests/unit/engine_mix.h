// The engine determinism workload shared by the CPU and GPU engine tests: a mix of requests on a
// golden model (V4's A by default; V4.1's A on the CPU engine) (greedy and seeded sampling, top-p,
// n = 2, logprobs and top logprobs), engine
// options for a device, exact comparison of results, and the speculative-decoding check (oracle
// drafts and n-gram drafts give the ids and logprobs of the run without drafts), and the overlap
// scheduling check (the same outputs with overlap on and off, with stop strings, stop ids and
// aborts).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "dsinfer/engine.h"
#include "engine/engine_core.h"
#include "letter_codec.h"

namespace dsinfer::testing {

// The smallest state budget `fixed + k * step` (k = 1, 2, ...) with which every request keeps its
// max_tokens when it runs alone (EngineCore::Prepare caps max_tokens by what the budget holds):
// a budget that forces preemption when several run at once. 0 when none up to k = 400 does.
inline int64_t SmallestBudgetHoldingEach(EngineOptions o, const std::vector<GenerateRequest>& reqs,
                                         int64_t fixed, int64_t step) {
  for (int64_t k = 1; k < 400; ++k) {
    o.state_memory_bytes = fixed + k * step;
    auto core = engine::EngineCore::Create(o);
    if (!core.ok()) continue;
    bool fits = true;
    for (const auto& r : reqs) {
      auto p = core.value()->Prepare(r);
      fits = fits && p.ok() && p->max_new_tokens == r.params.max_tokens;
    }
    if (fits) return o.state_memory_bytes;
  }
  return 0;
}

inline const std::string kGoldenModelA = std::string(DSINFER_SOURCE_DIR) + "/tests/data/golden/A";
// DeepSeek-V4.1's golden config A: 320 ids, a 256-token context (Mix() fits in it).
inline const std::string kGoldenV41ModelA =
    std::string(DSINFER_SOURCE_DIR) + "/tests/data/golden_v41/A";

inline std::vector<GenerateRequest> Mix(int count) {
  std::mt19937 rng(11);
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < count; ++i) {
    GenerateRequest r;
    const int len = 1 + static_cast<int>(rng() % 90);
    for (int t = 0; t < len; ++t) r.prompt_ids.push_back(2 + static_cast<int32_t>(rng() % 300));
    r.params.max_tokens = 4 + static_cast<int>(rng() % 28);
    r.params.ignore_eos = true;
    if (i % 3 == 0) {
      r.params.temperature = 0;  // greedy
    } else {
      r.params.temperature = 1.0f;
      r.params.top_p = i % 2 ? 0.9f : 1.0f;
      r.params.seed = 1000 + i;
    }
    r.params.n = i % 5 == 0 ? 2 : 1;
    r.params.logprobs = true;
    r.params.top_logprobs = i % 4 == 0 ? 3 : 0;
    reqs.push_back(r);
  }
  return reqs;
}

inline EngineOptions MixOptions(Device device, int max_running, int64_t batch_tokens,
                                int64_t state_bytes, const std::string& model = kGoldenModelA) {
  EngineOptions o;
  o.model_dir = model;
  o.device = device;
  o.max_running = max_running;
  o.max_batch_tokens = batch_tokens;
  o.state_memory_bytes = state_bytes;
  return o;
}

inline void ExpectSame(const std::vector<RequestResult>& a, const std::vector<RequestResult>& b,
                       const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(a[i].status.ok()) << what << " " << i << ": " << a[i].status.ToString();
    ASSERT_TRUE(b[i].status.ok()) << what << " " << i << ": " << b[i].status.ToString();
    ASSERT_EQ(a[i].completions.size(), b[i].completions.size()) << what << " " << i;
    for (size_t c = 0; c < a[i].completions.size(); ++c) {
      const Completion &x = a[i].completions[c], &y = b[i].completions[c];
      EXPECT_EQ(x.ids, y.ids) << what << ": request " << i << " completion " << c;
      ASSERT_EQ(x.logprobs.size(), y.logprobs.size()) << what << " " << i;
      for (size_t t = 0; t < x.logprobs.size(); ++t) {
        EXPECT_EQ(x.logprobs[t].logprob, y.logprobs[t].logprob) << what << " " << i << "/" << t;
        ASSERT_EQ(x.logprobs[t].top.size(), y.logprobs[t].top.size());
        for (size_t k = 0; k < x.logprobs[t].top.size(); ++k) {
          EXPECT_EQ(x.logprobs[t].top[k].id, y.logprobs[t].top[k].id);
          EXPECT_EQ(x.logprobs[t].top[k].logprob, y.logprobs[t].top[k].logprob);
        }
      }
    }
  }
}

// Speculative decoding is exact: with an oracle drafter (the reference outputs with one token
// wrong at a varying place, so verify steps accept anything from 0 to k drafts and roll back the
// rest) at a small and a large step budget, and with the real n-gram drafter, every request's ids
// and logprobs equal the run without speculation.
inline void ExpectSpeculationExact(Device device, const std::string& model = kGoldenModelA) {
  const std::vector<GenerateRequest> reqs = Mix(32);
  std::vector<RequestResult> want;
  {
    auto e = Engine::Create(MixOptions(device, 16, 256, int64_t{256} << 20, model));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    want = e.value()->Generate(reqs);
  }
  // Budget 24 mixes verify steps with prefill chunks; on the GPU its verify steps replay CUDA
  // graphs, and once more launch eagerly (enforce_eager).
  struct Run {
    int64_t budget;
    bool eager;
  };
  std::vector<Run> runs = {{24, false}, {256, false}};
  if (device == Device::kCuda) runs.push_back({24, true});
  for (const Run& run : runs) {
    const int64_t budget = run.budget;
    EngineOptions o = MixOptions(device, 16, budget, int64_t{256} << 20, model);
    o.speculative.method = SpeculativeOptions::Method::kNgram;
    o.speculative.num_tokens = 4;
    o.enforce_eager = run.eager;
    auto made = engine::EngineCore::Create(o);
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    engine::EngineCore& core = *made.value();
    core.set_drafter([&](uint64_t id, int index, const std::vector<int32_t>& tokens, int k) {
      const auto& ref = want[id - 1].completions[index].ids;
      const auto done = static_cast<int64_t>(tokens.size() - reqs[id - 1].prompt_ids.size());
      std::vector<int32_t> d;
      for (int64_t i = done; i < std::min<int64_t>(done + k, static_cast<int64_t>(ref.size())); ++i)
        d.push_back(ref[i]);
      const auto wrong = static_cast<size_t>((id * 7 + index * 3 + done * 5) % (k + 2));
      if (wrong < d.size()) d[wrong] = (d[wrong] + 1) % static_cast<int32_t>(core.vocab_size());
      return d;
    });
    for (size_t i = 0; i < reqs.size(); ++i) {
      auto p = core.Prepare(reqs[i]);
      ASSERT_TRUE(p.ok()) << p.status().ToString();
      core.Add(i + 1, *p);
    }
    std::vector<RequestResult> got(reqs.size());
    for (size_t i = 0; i < reqs.size(); ++i)
      got[i].completions.resize(static_cast<size_t>(reqs[i].params.n));
    std::vector<StreamEvent> events;
    while (core.HasWork()) {
      core.Step(&events);
      for (auto& ev : events) {
        Completion& c = got[ev.request_id - 1].completions[ev.index];
        c.ids.insert(c.ids.end(), ev.ids.begin(), ev.ids.end());
        c.logprobs.insert(c.logprobs.end(), ev.logprobs.begin(), ev.logprobs.end());
        if (!ev.error.ok()) got[ev.request_id - 1].status = ev.error;
      }
      events.clear();
    }
    ExpectSame(want, got,
               "oracle drafts, budget " + std::to_string(budget) + (run.eager ? ", eager" : ""));
    const EngineStats st = core.Stats();
    if (device == Device::kCuda) {  // the verify steps ran from graphs unless told not to
      EXPECT_EQ(st.graph_multi_token_steps > 0, !run.eager) << st.graph_multi_token_steps;
    }
    EXPECT_GT(st.spec_accepted_tokens, 0);
    EXPECT_LT(st.spec_accepted_tokens, st.spec_draft_tokens);
    EXPECT_EQ(core.num_states(), 0u);
  }
  EngineOptions o = MixOptions(device, 16, 256, int64_t{256} << 20, model);
  o.speculative.method = SpeculativeOptions::Method::kNgram;
  o.speculative.num_tokens = 3;
  auto e = Engine::Create(o);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ExpectSame(want, e.value()->Generate(reqs), "n-gram drafts");
}

// One completion as an EngineCore streamed it.
struct Streamed {
  std::vector<int32_t> ids;
  std::vector<std::pair<int32_t, float>> logprobs;  // per token: the token's, then its top ones
  std::string text;
  FinishReason finish = FinishReason::kNone;
  bool operator==(const Streamed&) const = default;
};

// Runs `reqs` (request i has id i + 1) through an EngineCore with the letter codec until it is
// idle, aborting before step s the requests in aborts[s]; checks that every state was freed.
// Returns [request][completion].
inline std::vector<std::vector<Streamed>> RunCore(
    const EngineOptions& o, const std::vector<GenerateRequest>& reqs,
    const std::map<int, std::vector<uint64_t>>& aborts = {}, EngineStats* stats = nullptr) {
  std::vector<std::vector<Streamed>> out(reqs.size());
  auto made = engine::EngineCore::Create(o, std::make_unique<LetterCodec>());
  EXPECT_TRUE(made.ok()) << made.status().ToString();
  if (!made.ok()) return out;
  engine::EngineCore& core = *made.value();
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto p = core.Prepare(reqs[i]);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    if (!p.ok()) return out;
    core.Add(i + 1, *p);
    out[i].resize(static_cast<size_t>(reqs[i].params.n));
  }
  std::vector<StreamEvent> events;
  for (int step = 0; core.HasWork() && step < 100000; ++step) {
    if (auto it = aborts.find(step); it != aborts.end()) {
      for (uint64_t id : it->second) core.Abort(id, &events);
    }
    core.Step(&events);
    for (auto& ev : events) {
      Streamed& c = out[ev.request_id - 1][ev.index];
      c.ids.insert(c.ids.end(), ev.ids.begin(), ev.ids.end());
      for (const auto& lp : ev.logprobs) {
        c.logprobs.push_back({lp.id, lp.logprob});
        for (const auto& t : lp.top) c.logprobs.push_back({t.id, t.logprob});
      }
      c.text += ev.text;
      EXPECT_TRUE(ev.error.ok()) << ev.error.ToString();
      if (ev.finish != FinishReason::kNone) c.finish = ev.finish;
    }
    events.clear();
  }
  EXPECT_FALSE(core.HasWork());
  EXPECT_EQ(core.num_states(), 0u);
  if (stats) *stats = core.Stats();
  return out;
}

// Overlap scheduling is exact: every completion's ids, logprobs, text and finish are the same
// with overlap on and off — greedy and seeded sampling, n = 2 (siblings fork at the launch),
// stop strings and stop ids (a completion that stops at step N - 1 already has step N launched,
// whose token is dropped), chunked prefills at a small step budget — and aborted requests stop
// with a prefix of their output while the others keep theirs.
inline void ExpectOverlapExact(Device device, const std::string& model = kGoldenModelA) {
  std::vector<GenerateRequest> reqs = Mix(32);
  EngineOptions serial = MixOptions(device, 16, 256, int64_t{256} << 20, model);
  serial.overlap = EngineOptions::Overlap::kOff;
  const auto free_run = RunCore(serial, reqs);
  // Stops that the free run meets: a letter of its k-th token, or the k-th token's id.
  for (size_t i = 0; i < reqs.size(); ++i) {
    const auto& ids = free_run[i][0].ids;
    const size_t k = 1 + i % 4;
    if (ids.size() <= k) continue;
    if (i % 3 == 1) reqs[i].params.stop = {LetterCodec::Piece(ids[k]).substr(0, 1)};
    if (i % 3 == 2) reqs[i].params.stop_token_ids = {ids[k]};
  }
  EngineStats st;
  const auto want = RunCore(serial, reqs, {}, &st);
  EXPECT_FALSE(st.overlap);
  int stopped = 0;
  for (const auto& r : want) {
    for (const auto& c : r) stopped += c.finish == FinishReason::kStop ? 1 : 0;
  }
  EXPECT_GE(stopped, 16) << "the stops must finish completions early";
  for (int64_t budget : {int64_t{24}, int64_t{256}}) {
    EngineOptions o = serial;
    o.max_batch_tokens = budget;
    o.overlap = EngineOptions::Overlap::kOn;
    const auto got = RunCore(o, reqs, {}, &st);
    EXPECT_TRUE(st.overlap);
    for (size_t i = 0; i < reqs.size(); ++i)
      EXPECT_EQ(got[i], want[i]) << "budget " << budget << ", request " << i;
  }
  const std::map<int, std::vector<uint64_t>> aborts = {{2, {3, 8}}, {5, {12, 21, 26}}};
  for (auto overlap : {EngineOptions::Overlap::kOff, EngineOptions::Overlap::kOn}) {
    EngineOptions o = serial;
    o.overlap = overlap;
    const auto got = RunCore(o, reqs, aborts);
    for (size_t i = 0; i < reqs.size(); ++i) {
      bool aborted = false;
      for (const auto& [step, ids] : aborts)
        aborted = aborted || std::count(ids.begin(), ids.end(), i + 1) > 0;
      if (!aborted) {
        EXPECT_EQ(got[i], want[i]) << "request " << i;
        continue;
      }
      for (size_t c = 0; c < got[i].size(); ++c) {
        const Streamed &g = got[i][c], &w = want[i][c];
        ASSERT_LE(g.ids.size(), w.ids.size());
        EXPECT_TRUE(std::equal(g.ids.begin(), g.ids.end(), w.ids.begin())) << "request " << i;
        EXPECT_TRUE(g.finish == FinishReason::kAbort || g == w) << "request " << i;
      }
    }
  }
}

}  // namespace dsinfer::testing
