// Expert parallelism on the CPU (model/deepseek_v4/expert_parallel.h): a model split over ranks
// gives the single model's logits, streams and MTP logits bit for bit — whatever the number of
// ranks, idle ranks, replicas, and EPLB moving experts between forwards — loads only each rank's
// experts, refuses bad input without leaving a rank waiting, and refuses what it does not run.
#include "model/deepseek_v4/expert_parallel.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "distributed/communicator.h"
#include "distributed/expert_placement.h"
#include "model/deepseek_v4/moe.h"
#include "model/model_loader.h"
#include "model/paged_state.h"
#include "model_test_util.h"

namespace dsinfer {
namespace {

using model::LanguageModel;
using model::ModelChunk;

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

const std::string& ModelDir() {
  // The release's formats (FP8 dense, FP4 experts), hash and top-k MoE layers and an MTP layer.
  static const std::string dir =
      testing::SmallModelDir(model::deepseek_v4::WeightFormat::kOfficial, "expert_parallel");
  return dir;
}

std::unique_ptr<LanguageModel> Load(int ranks, int redundant = 0, int64_t interval = 0) {
  model::LoadOptions o;
  o.num_threads = 2;
  o.expert_parallel = ranks;
  o.eplb_redundant_experts = redundant;
  o.eplb_interval = interval;
  auto m = model::LoadLanguageModel(ModelDir(), o);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(m).value() : nullptr;
}

// The single model and the same model over 3 ranks (the failure tests' pair).
std::pair<std::unique_ptr<LanguageModel>, std::unique_ptr<LanguageModel>> SingleAndThreeRanks() {
  return {Load(1), Load(3)};
}

// Everything one schedule of forwards returns: five requests prefilled in one step (tails 1-3),
// three decode steps of all of them, a step of one request only (idle ranks), a two-request step
// of 4-token chunks; streams kept on two steps; then the MTP layer over the prefill's rows.
struct Trace {
  std::vector<std::vector<float>> logits, streams;
};

// `between` runs after each step.
Trace RunSchedule(LanguageModel& m, const std::function<void()>& between) {
  const int slack = 4;
  const auto layout = m.StateLayoutFor(slack);
  std::vector<std::unique_ptr<model::HeapStatePages>> pages;
  std::vector<std::unique_ptr<model::ModelSequence>> seqs;
  const std::vector<int> prompt = {7, 1, 19, 3, 12};
  for (size_t i = 0; i < prompt.size(); ++i) {
    pages.push_back(std::make_unique<model::HeapStatePages>(layout));
    seqs.push_back(m.NewSequence(slack, layout, pages.back().get()));
  }
  Trace t;
  auto step = [&](const std::vector<ModelChunk>& chunks, bool streams) {
    auto out = m.Forward(chunks, streams);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    if (!out.ok()) return;
    t.logits.push_back(out->logits);
    if (streams) t.streams.push_back(out->streams);
    between();
  };
  std::vector<ModelChunk> prefill;
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < prompt.size(); ++i) {
    prompts.push_back(testing::RandomIds(prompt[i], 100 + static_cast<uint32_t>(i)));
    prefill.push_back({seqs[i].get(), prompts[i], 1 + static_cast<int64_t>(i % 3)});
  }
  step(prefill, true);
  for (int d = 0; d < 3; ++d) {
    std::vector<ModelChunk> decode;
    for (size_t i = 0; i < seqs.size(); ++i)
      decode.push_back({seqs[i].get(), testing::RandomIds(1, 200 + d * 10 + i), 1});
    step(decode, false);
  }
  step({{seqs[2].get(), testing::RandomIds(1, 300), 1}}, false);
  step({{seqs[0].get(), testing::RandomIds(4, 301), 4},
        {seqs[3].get(), testing::RandomIds(4, 302), 2}},
       true);
  // MTP over each request's prefill rows (those with a next token).
  std::vector<model::MtpChunk> mtp;
  const int64_t width = m.stream_width();
  int64_t row = 0;
  for (size_t i = 0; i < prompt.size(); ++i) {
    const int64_t n = prompt[i];
    if (n > 1) {
      model::MtpChunk ch;
      ch.seq = seqs[i].get();
      ch.streams.assign(t.streams[0].begin() + row * width,
                        t.streams[0].begin() + (row + n - 1) * width);
      ch.next_ids.assign(prompts[i].begin() + 1, prompts[i].end());
      mtp.push_back(std::move(ch));
    }
    row += n;
  }
  auto drafts = m.ForwardMtp(mtp);
  EXPECT_TRUE(drafts.ok()) << drafts.status().ToString();
  if (drafts.ok()) {
    t.logits.push_back(drafts->logits);
    t.streams.push_back(drafts->streams);
  }
  return t;
}

void ExpectSameTrace(const Trace& want, const Trace& got, const std::string& what) {
  ASSERT_EQ(want.logits.size(), got.logits.size()) << what;
  ASSERT_EQ(want.streams.size(), got.streams.size()) << what;
  for (size_t i = 0; i < want.logits.size(); ++i) {
    EXPECT_FALSE(want.logits[i].empty());
    EXPECT_TRUE(BitEqual(want.logits[i], got.logits[i])) << what << ": logits of step " << i;
  }
  for (size_t i = 0; i < want.streams.size(); ++i) {
    EXPECT_TRUE(BitEqual(want.streams[i], got.streams[i])) << what << ": streams " << i;
  }
}

TEST(ExpertParallelTest, RanksGiveTheSingleModelsBits) {
  auto single = Load(1);
  ASSERT_NE(single, nullptr);
  EXPECT_EQ(single->expert_parallel_stats(), nullptr);
  const Trace want = RunSchedule(*single, [] {});
  struct Layout {
    int ranks, redundant;
    int64_t interval;
    bool install_between;  // EPLB's plans installed between the steps (else whenever done)
  };
  for (const Layout& l : {Layout{2, 0, 0, false}, Layout{3, 0, 0, false}, Layout{8, 0, 0, false},
                          Layout{3, 4, 0, false}, Layout{3, 4, 1, true}, Layout{4, 8, 2, true},
                          Layout{3, 4, 1, false}}) {
    const std::string what = std::to_string(l.ranks) + " ranks, " + std::to_string(l.redundant) +
                             " redundant, interval " + std::to_string(l.interval);
    auto m = Load(l.ranks, l.redundant, l.interval);
    ASSERT_NE(m, nullptr) << what;
    LanguageModel& mr = *m;
    ExpectSameTrace(want,
                    RunSchedule(mr,
                                [&] {
                                  if (l.install_between) model::deepseek_v4::FinishRebalance(mr);
                                }),
                    what);
    model::deepseek_v4::FinishRebalance(*m);
    const auto* stats = m->expert_parallel_stats();
    ASSERT_NE(stats, nullptr);
    EXPECT_EQ(stats->ranks, l.ranks);
    EXPECT_EQ(stats->forwards, 6) << what;
    const int64_t moe_layers = testing::SmallConfig().num_layers + 1;  // + the MTP layer
    const int64_t experts = testing::SmallConfig().n_routed_experts;
    if (l.interval == 0) {
      EXPECT_EQ(stats->rebalances, 0);
      // Each rank loaded its share only: every expert once, plus the replicas.
      EXPECT_EQ(stats->held_experts, moe_layers * (experts + l.redundant)) << what;
    } else {
      // One plan at a time, each installed before a later forward (whenever it is done) or by
      // FinishRebalance: one per interval when installed between the steps.
      if (l.install_between) {
        EXPECT_EQ(stats->rebalances, 6 / l.interval) << what;
      } else {
        EXPECT_GE(stats->rebalances, 1) << what;
        EXPECT_LE(stats->rebalances, 6 / l.interval) << what;
      }
      EXPECT_GT(stats->experts_moved, 0) << what;  // the measured loads moved some experts
      EXPECT_GE(stats->imbalance_before, 1.0);
      EXPECT_LE(stats->imbalance_after, stats->imbalance_before + 1e-9) << what;
      EXPECT_LE(stats->held_experts, moe_layers * (experts + l.redundant)) << what;
      EXPECT_GE(stats->held_experts, moe_layers * experts) << what;
    }
  }
}

TEST(ExpertParallelTest, BadInputIsRefusedBeforeAnyRankStarts) {
  auto [single, m] = SingleAndThreeRanks();
  ASSERT_NE(single, nullptr);
  ASSERT_NE(m, nullptr);
  const auto layout = m->StateLayoutFor(0);
  model::HeapStatePages pa(layout), pb(layout), pc(layout);
  auto a = m->NewSequence(0, layout, &pa), b = m->NewSequence(0, layout, &pb);
  auto c = single->NewSequence(0, layout, &pc);
  const std::vector<int32_t> ids = testing::RandomIds(5, 9);
  // An id outside the vocabulary in one request of a multi-rank step: refused, nothing run.
  auto bad = m->Forward({{a.get(), ids, 1}, {b.get(), {1, 2, 100000}, 1}}, false);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(a->length(), 0);
  auto twice = m->Forward({{a.get(), ids, 1}, {a.get(), ids, 1}}, false);
  EXPECT_EQ(twice.status().code(), StatusCode::kInvalidArgument);
  // The group still works, and gives the single model's logits.
  auto ok = m->Forward({{a.get(), ids, 1}}, false);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  auto want = single->Forward({{c.get(), ids, 1}}, false);
  ASSERT_TRUE(want.ok());
  EXPECT_TRUE(BitEqual(want->logits, ok->logits));
  // A bad MTP chunk too.
  model::MtpChunk mtp;
  mtp.seq = a.get();
  mtp.next_ids = {1, 2};
  mtp.streams.assign(3, 0.0f);
  EXPECT_EQ(m->ForwardMtp({mtp}).status().code(), StatusCode::kInvalidArgument);
}

// A rank that fails mid-forward (after its first layers, at a MoE exchange; with rows or idle)
// fails the forward with its error instead of leaving the others waiting, and the next forward
// runs on a new group with the single model's logits.
TEST(ExpertParallelTest, ARankFailingMidForwardFailsOnlyThatForward) {
  auto [single, m] = SingleAndThreeRanks();
  ASSERT_NE(single, nullptr);
  ASSERT_NE(m, nullptr);
  const auto layout = m->StateLayoutFor(0);
  std::vector<std::unique_ptr<model::HeapStatePages>> pages;
  auto fresh = [&](LanguageModel& lm) {
    pages.push_back(std::make_unique<model::HeapStatePages>(layout));
    return lm.NewSequence(0, layout, pages.back().get());
  };
  struct Failure {
    int rank, layer, chunks;  // chunks < 3: some ranks idle
  };
  uint32_t seed = 40;
  for (const Failure& f : {Failure{1, 2, 3}, Failure{2, 1, 1}, Failure{0, 0, 2}}) {
    model::deepseek_v4::FailRankOnceForTesting(*m, f.rank, f.layer);
    std::vector<std::unique_ptr<model::ModelSequence>> seqs;
    std::vector<ModelChunk> chunks;
    for (int i = 0; i < f.chunks; ++i) {
      seqs.push_back(fresh(*m));
      chunks.push_back({seqs.back().get(), testing::RandomIds(5 + i, ++seed), 1});
    }
    auto bad = m->Forward(chunks, false);
    ASSERT_EQ(bad.status().code(), StatusCode::kInternal) << bad.status().ToString();
    EXPECT_NE(bad.status().message().find("injected"), std::string::npos)
        << bad.status().ToString();
    auto a = fresh(*m), b = fresh(*single);
    const std::vector<int32_t> ids = testing::RandomIds(9, ++seed);
    auto got = m->Forward({{a.get(), ids, 2}}, false);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    auto want = single->Forward({{b.get(), ids, 2}}, false);
    ASSERT_TRUE(want.ok());
    EXPECT_TRUE(BitEqual(want->logits, got->logits)) << "after rank " << f.rank << "'s failure";
  }
}

// MoeForwardParallel against MoeForward on a hash-routed layer whose table gives some tokens the
// same expert twice (ties combined in k order) and over a placement with replicas, each of three
// ranks routing its own rows: every row's output bit for bit.
TEST(ExpertParallelTest, MoeCombinesDuplicateHashExpertsAsTheSingleModel) {
  io::DeepseekV4Config c = testing::SmallConfig();
  const int64_t D = c.hidden_size, E = c.n_routed_experts, K = c.num_experts_per_tok, V = 40;
  std::mt19937 rng(17);
  model::deepseek_v4::MoeWeights w = testing::RandomMoeWeights(c, rng, /*shared=*/true);
  for (int64_t v = 0; v < V; ++v) {
    for (int64_t k = 0; k < K; ++k) {
      // Every third token: its first expert twice.
      const int64_t e = v % 3 == 0 ? (v * 5) % E : (v * 5 + k * 3) % E;
      w.tid2eid.push_back(static_cast<int32_t>(e));
    }
  }
  const int64_t n = 24;
  const std::vector<float> x = testing::RandomFloats(n * D, rng);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) id = static_cast<int32_t>(rng() % V);
  std::vector<float> want(static_cast<size_t>(n * D));
  model::deepseek_v4::MoeForward(w, c, x.data(), ids.data(), n, want.data(), nullptr);

  // Three ranks of 4 slots: experts 0-7 once, experts 0, 5 and 2 again (replicas).
  auto place = distributed::ExpertPlacement::FromSlots(static_cast<int>(E), 3,
                                                       {0, 1, 2, 3, 4, 5, 6, 0, 7, 5, 2, -1});
  ASSERT_TRUE(place.ok()) << place.status().ToString();
  auto group = distributed::MakeLocalGroup(3);
  std::vector<std::vector<float>> got(3);
  std::vector<Status> status(3, Status::Ok());
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      // Rank r's rows: r, r + 3, ... (rank 2 has fewer).
      std::vector<float> xr;
      std::vector<int32_t> idr;
      for (int64_t t = r; t < n - (r == 2 ? 6 : 0); t += 3) {
        xr.insert(xr.end(), x.begin() + t * D, x.begin() + (t + 1) * D);
        idr.push_back(ids[t]);
      }
      got[r].resize(xr.size());
      const model::deepseek_v4::MoeParallel ep{group[r].get(), &*place, nullptr, nullptr};
      status[r] = model::deepseek_v4::MoeForwardParallel(w, c, xr.data(), idr.data(),
                                                         static_cast<int64_t>(idr.size()),
                                                         got[r].data(), nullptr, ep);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(status[r].ok()) << status[r].ToString();
  for (int r = 0; r < 3; ++r) {
    int64_t i = 0;
    for (int64_t t = r; t < n - (r == 2 ? 6 : 0); t += 3, ++i) {
      EXPECT_EQ(std::memcmp(got[r].data() + i * D, want.data() + t * D, D * sizeof(float)), 0)
          << "row " << t << " (token " << ids[t] << ")";
    }
  }
}

TEST(ExpertParallelTest, RefusesWhatItDoesNotRun) {
  auto load = [](const std::string& dir, int ranks, int redundant, int64_t interval) {
    model::LoadOptions o;
    o.num_threads = 1;
    o.expert_parallel = ranks;
    o.eplb_redundant_experts = redundant;
    o.eplb_interval = interval;
    return model::LoadLanguageModel(dir, o).status();
  };
  EXPECT_EQ(load(ModelDir(), 0, 0, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(load(ModelDir(), 65, 0, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(load(ModelDir(), 2, -1, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(load(ModelDir(), 2, 0, -3).code(), StatusCode::kInvalidArgument);
  // 8 experts on 2 ranks: at most 8 replicas more (each rank holding every expert).
  EXPECT_TRUE(load(ModelDir(), 2, 8, 0).ok());
  EXPECT_EQ(load(ModelDir(), 2, 9, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(load(testing::SmallV41ModelDir("expert_parallel_v41"), 2, 0, 0).code(),
            StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace dsinfer
