// Expert parallelism on the CPU (model/deepseek_v4/expert_parallel.h): a model split over ranks
// gives the single model's logits, streams and MTP logits bit for bit — whatever the number of
// ranks, idle ranks, replicas, and EPLB moving experts between forwards — loads only each rank's
// experts, refuses bad input without leaving a rank waiting, and refuses what it does not run.
#include "model/deepseek_v4/expert_parallel.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

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
  auto single = Load(1);
  auto m = Load(3);
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
