// The n-gram drafter and the adaptive draft length (speculative/).
#include <gtest/gtest.h>

#include <random>

#include "speculative/draft_length.h"
#include "speculative/ngram.h"

namespace dsinfer::speculative {
namespace {

TEST(NgramTest, ProposesWhatFollowedTheLatestLongestMatch) {
  const NgramOptions o{1, 3};
  // Suffix "1 2 3" occurred at 0 (followed by 4 5 6) and "2 3" at 7 (followed by 9): the longest
  // match wins.
  EXPECT_EQ(ProposeNgram({1, 2, 3, 4, 5, 6, 0, 2, 3, 9, 1, 2, 3}, 3, o),
            (std::vector<int32_t>{4, 5, 6}));
  // Two earlier occurrences of "7 8": the latest one's continuation.
  EXPECT_EQ(ProposeNgram({7, 8, 1, 7, 8, 2, 7, 8}, 2, o), (std::vector<int32_t>{2, 7}));
  // k bounds the draft, the list's end bounds the continuation.
  EXPECT_EQ(ProposeNgram({5, 6, 5}, 4, o), (std::vector<int32_t>{6, 5}));
  EXPECT_EQ(ProposeNgram({1, 2, 3, 4}, 3, o), std::vector<int32_t>{});  // nothing recurs
  EXPECT_EQ(ProposeNgram({1, 1}, 0, o), std::vector<int32_t>{});
  // min_n: a single-token match is not enough at 2.
  EXPECT_EQ(ProposeNgram({4, 9, 1, 4}, 2, {2, 3}), std::vector<int32_t>{});
  EXPECT_EQ(ProposeNgram({4, 9, 1, 4}, 2, {1, 3}), (std::vector<int32_t>{9, 1}));
}

// The index gives ProposeNgram's drafts at every length of growing sequences over small
// vocabularies (many repeats), for several n ranges and draft counts, and after the list shrinks.
TEST(NgramTest, IndexProposesWhatTheScanProposes) {
  std::mt19937 rng(5);
  int64_t found = 0;
  for (int vocab : {2, 3, 8, 50}) {
    for (const NgramOptions o : {NgramOptions{1, 4}, NgramOptions{2, 3}, NgramOptions{3, 3}}) {
      NgramIndex index;
      std::vector<int32_t> tokens;
      for (int i = 0; i < 300; ++i) {
        tokens.push_back(static_cast<int32_t>(rng() % vocab));
        if (i == 200) tokens.resize(120);  // shorter than indexed: indexed again
        const int k = 1 + static_cast<int>(rng() % 5);
        const auto want = ProposeNgram(tokens, k, o);
        ASSERT_EQ(index.Propose(tokens, k, o), want)
            << "vocab " << vocab << " n " << o.min_n << ".." << o.max_n << " length "
            << tokens.size();
        found += !want.empty();
      }
    }
  }
  EXPECT_GT(found, 1000);  // the comparison saw drafts, not only empty lists
}

TEST(DraftLengthTest, AdaptsToAcceptance) {
  DraftLength fixed(5, false);
  fixed.Observe(5, 0);
  EXPECT_EQ(fixed.Next(), 5);
  DraftLength d(5, true);
  for (int i = 0; i < 10; ++i) d.Observe(5, 5);
  EXPECT_EQ(d.Next(), 5) << "every draft accepted: draft the most";
  for (int i = 0; i < 10; ++i) d.Observe(d.Next(), 0);
  EXPECT_EQ(d.Next(), 1) << "every draft rejected: draft one, to keep measuring";
  for (int i = 0; i < 20; ++i) d.Observe(d.Next(), d.Next());
  EXPECT_GT(d.Next(), 1) << "acceptance recovered";
  EXPECT_EQ(DraftLength().Next(), 0);
}

TEST(StepCostModelTest, FitsBasePerRowAndPerDraft) {
  StepCostModel m;
  EXPECT_FALSE(m.ready());
  for (int i = 0; i < 12; ++i) {
    const int64_t rows = int64_t{1} << (i % 5);  // 1 .. 16 rows
    m.ObserveStep(rows, 0.01 + 0.001 * static_cast<double>(rows));
  }
  EXPECT_TRUE(m.ready());
  EXPECT_NEAR(m.base(), 0.01, 1e-9);
  EXPECT_NEAR(m.per_row(), 0.001, 1e-9);
  m.ObserveDrafting(4, 0.02);
  EXPECT_NEAR(m.per_draft(), 0.005, 1e-12);
  // One sequence's share of a step of 4 verifying 2 drafts: 0.01 / 4 + 0.001 * 3 + 0.005 * 2.
  EXPECT_NEAR(m.SequenceCost(2, 4), 0.0025 + 0.003 + 0.01, 1e-9);
  // Rows that never vary: all the time counts as per-row time.
  StepCostModel flat;
  for (int i = 0; i < 10; ++i) flat.ObserveStep(8, 0.008);
  EXPECT_NEAR(flat.per_row(), 0.001, 1e-12);
  EXPECT_NEAR(flat.base(), 0.0, 1e-12);
}

// With a fitted cost model the draft length is the k with the least expected time per token,
// cost(k) / (1 + a + ... + a^k), checked here against a brute-force search; a length of 0 turns
// into one draft every kProbeEvery steps.
TEST(DraftLengthTest, CostModelPicksTheCheapestLengthPerToken) {
  struct Costs {
    double base, per_row, per_draft;
  };
  for (const Costs c : {Costs{0.01, 1e-5, 0}, Costs{0.01, 1e-3, 0}, Costs{0, 1e-3, 0},
                        Costs{0.01, 1e-4, 0.01}, Costs{0.002, 1e-3, 5e-4}}) {
    StepCostModel m;
    for (int i = 0; i < 16; ++i) {
      const int64_t rows = 1 + i % 8;
      m.ObserveStep(rows, c.base + c.per_row * static_cast<double>(rows));
    }
    if (c.per_draft > 0) m.ObserveDrafting(10, 10 * c.per_draft);
    for (int accepted : {0, 2, 5}) {
      DraftLength d(5, true);
      for (int i = 0; i < 10; ++i) d.Observe(5, accepted);
      for (int64_t batch : {int64_t{1}, int64_t{32}}) {
        const double a = d.acceptance();
        int want = 0;
        double best = m.SequenceCost(0, batch), tokens = 1, power = 1;
        for (int k = 1; k <= 5; ++k) {
          power *= a;
          tokens += power;
          if (m.SequenceCost(k, batch) / tokens < best) {
            best = m.SequenceCost(k, batch) / tokens;
            want = k;
          }
        }
        EXPECT_EQ(d.Next(&m, batch), want)
            << "base " << c.base << " per_row " << c.per_row << " per_draft " << c.per_draft
            << " accepted " << accepted << " batch " << batch;
      }
    }
  }
  // Memory-bound steps (rows almost free) and drafts that are always accepted: the most drafts.
  StepCostModel gpu;
  for (int i = 0; i < 16; ++i) gpu.ObserveStep(1 + i % 8, 0.0015 + 1e-6 * (1 + i % 8));
  DraftLength keen(4, true);
  for (int i = 0; i < 10; ++i) keen.Observe(4, 4);
  EXPECT_EQ(keen.Next(&gpu, 1), 4);
  // Drafting dearer than a step: none, then a probe after kProbeEvery steps without drafts.
  StepCostModel dear = gpu;
  dear.ObserveDrafting(1, 1.0);
  DraftLength d(4, true);
  for (int i = 0; i < 10; ++i) d.Observe(4, 1);
  EXPECT_EQ(d.Next(&dear, 1), 0);
  for (int i = 0; i < DraftLength::kProbeEvery; ++i) d.Skipped();
  EXPECT_EQ(d.Next(&dear, 1), 1);
  d.Observe(1, 0);
  EXPECT_EQ(d.Next(&dear, 1), 0);
  // Not adaptive: always the maximum, whatever the costs.
  EXPECT_EQ(DraftLength(4, false).Next(&dear, 1), 4);
}

// DSpark's confidence head: the verified length from the drafts' own acceptance probabilities.
TEST(DraftLengthTest, SurvivalOfScoredDraftsSetsTheLength) {
  const std::vector<float> p = {0.9f, 0.8f, 0.5f, 0.2f, 0.9f};  // survival .9 .72 .36 .072 .065
  EXPECT_EQ(DraftLength(5, false).FromSurvival(p), 5) << "not adaptive: every draft";
  EXPECT_EQ(DraftLength(3, false).FromSurvival(p), 3) << "at most the maximum";
  EXPECT_EQ(DraftLength(8, false).FromSurvival(p), 5) << "at most the drafts";
  // Before the cost model: the drafts while their survival is at least 0.3, at least one.
  EXPECT_EQ(DraftLength(5, true).FromSurvival(p), 3);
  EXPECT_EQ(DraftLength(5, true).FromSurvival({0.1f, 0.9f}), 1);
  EXPECT_EQ(DraftLength(5, true).FromSurvival({}), 0);
  // With it: the k with the least expected time per token, the drafting itself already paid.
  StepCostModel m;
  for (int i = 0; i < 16; ++i) m.ObserveStep(1 + i % 8, 0.01 + 1e-3 * (1 + i % 8));
  m.ObserveDrafting(5, 5.0);  // dear drafting changes nothing: it is sunk
  for (int64_t batch : {int64_t{1}, int64_t{64}}) {
    int want = 0;
    const double base = m.SequenceCost(0, batch);
    double best = base, tokens = 1, survival = 1;
    for (int k = 1; k <= 5; ++k) {
      survival *= p[k - 1];
      tokens += survival;
      const double cost = (base + m.per_row() * k) / tokens;
      if (cost < best) {
        best = cost;
        want = k;
      }
    }
    EXPECT_EQ(DraftLength(5, true).FromSurvival(p, &m, batch), want) << "batch " << batch;
    EXPECT_GT(want, 0);
  }
  // Rows as dear as steps and drafts the head doubts: none.
  StepCostModel rows;
  for (int i = 0; i < 16; ++i) rows.ObserveStep(1 + i % 8, 0.01 * (1 + i % 8));
  EXPECT_EQ(DraftLength(5, true).FromSurvival({0.05f, 0.05f}, &rows, 1), 0);
  // Such blocks count as rejections: the acceptance falls until the sequence stops drafting (but
  // for a probe every kProbeEvery steps); a block worth verifying counts nothing by itself.
  DraftLength doubted(5, true);
  const double before = doubted.acceptance();
  EXPECT_EQ(doubted.FromSurvival({0.9f, 0.9f}, &rows, 1), 0);
  EXPECT_LT(doubted.acceptance(), before);
  for (int i = 0; i < 20; ++i) doubted.FromSurvival({0.05f}, &rows, 1);
  EXPECT_EQ(doubted.Next(&rows, 1), 0);
  DraftLength trusted(5, true);
  EXPECT_GT(trusted.FromSurvival({0.99f, 0.99f, 0.99f}), 0);
  EXPECT_EQ(trusted.acceptance(), before);
}

}  // namespace
}  // namespace dsinfer::speculative
